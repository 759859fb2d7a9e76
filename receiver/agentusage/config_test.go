package agentusage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/agentmeter/agentmeter/internal/configtest"
)

func TestConfigLoads(t *testing.T) {
	configtest.Loads(t, NewFactory(), []configtest.Section{
		{ID: component.NewID(Type), Want: createDefaultConfig()},
		{ID: component.NewIDWithName(Type, "custom"), Want: func() *Config {
			c := createDefaultConfig().(*Config)
			c.ServerConfig.NetAddr.Endpoint = "127.0.0.1:5319"
			c.ServerConfig.MaxRequestBodySize = 1 << 20
			c.APIKeys = []configopaque.String{"key-one", "pk-lf-1:sk-lf-1"}
			c.PendingTimeout = 30 * time.Second
			c.MaxPending = 100
			c.RetryAfter = 3 * time.Second
			return c
		}()},
	})
}

func TestDefaultConfigIsLoopback(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, "localhost:4319", cfg.ServerConfig.NetAddr.Endpoint)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
}

func TestConfigValidateNamesEveryBadKey(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.ServerConfig.NetAddr.Endpoint = ""
	cfg.APIKeys = []configopaque.String{"ok", ""}
	cfg.PendingTimeout = 0
	cfg.MaxPending = -1
	cfg.RetryAfter = -time.Second
	configtest.ErrorHas(t, cfg.Validate(),
		"endpoint must not be empty",
		"api_keys[1] must not be empty",
		"pending_timeout must be positive",
		"max_pending must be positive",
		"retry_after must not be negative",
	)
}

func TestSecretsAreRedacted(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKeys = []configopaque.String{"super-secret"}
	assert.NotContains(t, cfg.APIKeys[0].String(), "super-secret")
}
