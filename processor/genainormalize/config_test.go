package genainormalize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/agentmeter/agentmeter/internal/configtest"
)

func TestLoadConfig(t *testing.T) {
	configtest.Loads(t, NewFactory(), []configtest.Section{
		{ID: component.NewID(Type), Want: createDefaultConfig()},
		{ID: component.NewIDWithName(Type, "no_langchain"), Want: &Config{Conventions: []string{ConvSemconv, ConvOpenLLMetry, ConvOpenInference, ConvAISDK}}},
		{ID: component.NewIDWithName(Type, "none"), Want: &Config{Conventions: []string{}}},
	})
}

func TestConfigStruct(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(NewFactory().CreateDefaultConfig()))
}

func TestValidate(t *testing.T) {
	assert.NoError(t, createDefaultConfig().Validate())
	err := (&Config{Conventions: []string{"openinference", "otel", "openinference", "ai-sdk"}}).Validate()
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `conventions[1]: unknown convention "otel"`)
	assert.Contains(t, msg, `conventions[2]: "openinference" is listed twice`)
	assert.Contains(t, msg, `conventions[3]: unknown convention "ai-sdk"`)
}

func TestMask(t *testing.T) {
	assert.Equal(t, convSemconv|convOpenLLMetry|convOpenInference|convAISDK|convLangChain, createDefaultConfig().mask())
	assert.Equal(t, convAISDK, (&Config{Conventions: []string{ConvAISDK}}).mask())
}
