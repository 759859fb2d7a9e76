package genainormalize

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(Type), createDefaultConfig()},
		{component.NewIDWithName(Type, "no_langchain"), &Config{Conventions: []string{ConvSemconv, ConvOpenLLMetry, ConvOpenInference, ConvAISDK}}},
		{component.NewIDWithName(Type, "none"), &Config{Conventions: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, cfg)
		})
	}
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
