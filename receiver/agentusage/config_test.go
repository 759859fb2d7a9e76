package agentusage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestConfigLoads(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		id   component.ID
		want func() *Config
	}{
		{component.NewID(Type), func() *Config { return createDefaultConfig().(*Config) }},
		{component.NewIDWithName(Type, "custom"), func() *Config {
			c := createDefaultConfig().(*Config)
			c.ServerConfig.NetAddr.Endpoint = "127.0.0.1:5319"
			c.ServerConfig.MaxRequestBodySize = 1 << 20
			c.APIKeys = []configopaque.String{"key-one", "pk-lf-1:sk-lf-1"}
			c.PendingTimeout = 30 * time.Second
			c.MaxPending = 100
			c.RetryAfter = 3 * time.Second
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want(), cfg)
		})
	}
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
	err := cfg.Validate()
	require.Error(t, err)
	for _, msg := range []string{
		"endpoint must not be empty",
		"api_keys[1] must not be empty",
		"pending_timeout must be positive",
		"max_pending must be positive",
		"retry_after must not be negative",
	} {
		assert.Contains(t, err.Error(), msg)
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKeys = []configopaque.String{"super-secret"}
	assert.NotContains(t, cfg.APIKeys[0].String(), "super-secret")
}
