package langfuse

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
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// loadConfig reads one component entry of testdata/config.yaml the way the collector
// does: defaults from env, then the YAML over them.
func loadConfig(t *testing.T, env map[string]string, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := newFactory(envconfig.FromMap(env)).CreateDefaultConfig().(*Config)
	id := component.NewID(componentType)
	if name != "" {
		id = component.NewIDWithName(componentType, name)
	}
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestCheckConfigStruct(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(newConfig(envconfig.FromMap(nil))))
}

// The Langfuse cases of DeerFlow's test_tracing_config.py, plus its truthy and trimming
// rules for the environment variables, through a
// bare `langfuse:` entry.
func TestEnvDefaults(t *testing.T) {
	const msgPrefix = "Langfuse tracing is enabled but required settings are missing: "
	for _, tc := range []struct {
		name     string
		env      map[string]string
		enabled  bool
		endpoint string
		pk, sk   string
		err      string
	}{
		{name: "nothing set: disabled, cloud default", env: nil, endpoint: DefaultEndpoint},
		{
			name: "test_langfuse_config_is_loaded",
			env: map[string]string{"LANGFUSE_TRACING": "true", "LANGFUSE_PUBLIC_KEY": "pk-lf-test",
				"LANGFUSE_SECRET_KEY": "sk-lf-test", "LANGFUSE_BASE_URL": "https://langfuse.example"},
			enabled: true, endpoint: "https://langfuse.example", pk: "pk-lf-test", sk: "sk-lf-test",
		},
		{
			name: "test_dual_provider_config_is_loaded",
			env: map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "lsv2-key",
				"LANGFUSE_TRACING": "true", "LANGFUSE_PUBLIC_KEY": "pk-lf-test", "LANGFUSE_SECRET_KEY": "sk-lf-test"},
			enabled: true, endpoint: DefaultEndpoint, pk: "pk-lf-test", sk: "sk-lf-test",
		},
		{
			name: "test_prefers_langsmith_env_names: langsmith only leaves langfuse off",
			env: map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "lsv2-key",
				"LANGFUSE_PUBLIC_KEY": "pk-lf-test", "LANGFUSE_SECRET_KEY": "sk-lf-test"},
			endpoint: DefaultEndpoint, pk: "pk-lf-test", sk: "sk-lf-test",
		},
		{
			name:    "test_langfuse_enabled_requires_public_and_secret_keys",
			env:     map[string]string{"LANGFUSE_TRACING": "true", "LANGFUSE_SECRET_KEY": "sk-lf-test"},
			enabled: true, endpoint: DefaultEndpoint, sk: "sk-lf-test",
			err: msgPrefix + "LANGFUSE_PUBLIC_KEY",
		},
		{
			name:    "both keys missing, in order",
			env:     map[string]string{"LANGFUSE_TRACING": "1"},
			enabled: true, endpoint: DefaultEndpoint,
			err: msgPrefix + "LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY",
		},
		{
			name:    "secret missing only",
			env:     map[string]string{"LANGFUSE_TRACING": "yes", "LANGFUSE_PUBLIC_KEY": "pk-lf-test"},
			enabled: true, endpoint: DefaultEndpoint, pk: "pk-lf-test",
			err: msgPrefix + "LANGFUSE_SECRET_KEY",
		},
		{
			name:    "whitespace-only keys count as missing; values are trimmed",
			env:     map[string]string{"LANGFUSE_TRACING": " ON ", "LANGFUSE_PUBLIC_KEY": "   ", "LANGFUSE_SECRET_KEY": " sk-lf-test ", "LANGFUSE_BASE_URL": " https://x.example "},
			enabled: true, endpoint: "https://x.example", sk: "sk-lf-test",
			err: msgPrefix + "LANGFUSE_PUBLIC_KEY",
		},
		{
			name:     "disabled is never validated",
			env:      map[string]string{"LANGFUSE_TRACING": "false"},
			endpoint: DefaultEndpoint,
		},
		{
			name:     "non-truthy text is false",
			env:      map[string]string{"LANGFUSE_TRACING": "enabled", "LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"},
			endpoint: DefaultEndpoint, pk: "pk", sk: "sk",
		},
		{
			name:     "whitespace-only LANGFUSE_TRACING is absent",
			env:      map[string]string{"LANGFUSE_TRACING": "  "},
			endpoint: DefaultEndpoint,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t, tc.env, "")
			assert.Equal(t, tc.enabled, cfg.Enabled)
			assert.Equal(t, tc.endpoint, cfg.Endpoint)
			assert.Equal(t, configopaque.String(tc.pk), cfg.PublicKey)
			assert.Equal(t, configopaque.String(tc.sk), cfg.SecretKey)
			err := confmap.Validate(cfg)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.err, err.Error())
		})
	}
}

func TestYAMLOverridesEnv(t *testing.T) {
	env := map[string]string{"LANGFUSE_TRACING": "true", "LANGFUSE_PUBLIC_KEY": "pk-lf-env",
		"LANGFUSE_SECRET_KEY": "sk-lf-env", "LANGFUSE_BASE_URL": "https://env.example"}

	cfg := loadConfig(t, env, "full")
	want := newConfig(envconfig.FromMap(env))
	want.Endpoint = "https://langfuse.internal.example:3000/prefix"
	want.PublicKey, want.SecretKey = "pk-lf-yaml", "sk-lf-yaml"
	want.CheckCredentials = true
	want.Timeout = 12 * time.Second
	want.CompressionParams.Level = 9
	want.Headers.Set("x-team", "agents")
	q := want.QueueConfig.Get()
	q.NumConsumers, q.QueueSize = 2, 500
	storage := component.MustNewID("file_storage")
	q.StorageID = &storage
	want.RetryConfig.InitialInterval = time.Second
	want.RetryConfig.MaxInterval = 10 * time.Second
	want.RetryConfig.MaxElapsedTime = 2 * time.Minute
	q.Sizer = exporterhelper.RequestSizerTypeRequests // queue_size without sizer: stock meaning
	want.enabled.Settle(confmap.NewFromStringMap(map[string]any{"enabled": true}), &want.Enabled)
	assert.Equal(t, want, cfg)
	assert.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "https://langfuse.internal.example:3000/prefix/api/public/otel/v1/traces", tracesURL(cfg.Endpoint))
	assert.Equal(t, "https://langfuse.internal.example:3000/prefix/api/public/projects", projectsURL(cfg.Endpoint))

	// enabled: false in YAML beats LANGFUSE_TRACING=true
	cfg = loadConfig(t, env, "disabled")
	assert.False(t, cfg.Enabled)
	assert.NoError(t, confmap.Validate(cfg))
}

// How `enabled` settles when YAML gives keys but says nothing about enabled.
func TestEnabledFromYAMLKeys(t *testing.T) {
	// nothing in the environment: keys in the YAML are an intent to export
	cfg := loadConfig(t, nil, "keys_only")
	assert.True(t, cfg.Enabled)
	assert.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "public_key/secret_key set in the configuration", cfg.disabledReason())

	// an explicit LANGFUSE_TRACING=false still wins over keys
	cfg = loadConfig(t, map[string]string{"LANGFUSE_TRACING": "false"}, "keys_only")
	assert.False(t, cfg.Enabled)
	assert.Equal(t, `LANGFUSE_TRACING is "false"`, cfg.disabledReason())

	// enabled: true without keys anywhere fails fast with DeerFlow's message
	cfg = loadConfig(t, nil, "enabled_no_keys")
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.Equal(t, "Langfuse tracing is enabled but required settings are missing: LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY", err.Error())

	// ... and with env keys it is complete
	cfg = loadConfig(t, map[string]string{"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"}, "enabled_no_keys")
	assert.NoError(t, confmap.Validate(cfg))
}

func TestValidateEndpoint(t *testing.T) {
	cfg := loadConfig(t, nil, "bad_endpoint")
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `endpoint must be an http or https URL, not scheme "ftp"`)
	assert.NotContains(t, err.Error(), "hunter2")

	cfg = loadConfig(t, nil, "zstd")
	err = confmap.Validate(cfg)
	require.Error(t, err)
	assert.Equal(t, `compression must be gzip or none, not "zstd": Langfuse accepts only gzip request bodies`, err.Error())

	for endpoint, want := range map[string]string{
		"":                             "endpoint must be set",
		"https://u:pw@cloud.example":   "endpoint must not carry credentials",
		"https://cloud.example/?a=b":   "endpoint must be a base URL without query or fragment",
		"https://":                     "endpoint must name a host",
		"://bad":                       "endpoint must be a valid URL",
		"https://cloud.langfuse.com/":  "",
		"http://127.0.0.1:3000/lf/api": "",
	} {
		c := newConfig(envconfig.FromMap(nil))
		c.Enabled, c.PublicKey, c.SecretKey, c.Endpoint = true, "pk", "sk", endpoint
		err := c.Validate()
		if want == "" {
			assert.NoError(t, err, endpoint)
			continue
		}
		if assert.Error(t, err, endpoint) {
			assert.Contains(t, err.Error(), want, endpoint)
			assert.NotContains(t, err.Error(), "pw", endpoint)
		}
	}
}

// Secrets print as [REDACTED] wherever the config itself is printed or marshalled.
func TestSecretsRedacted(t *testing.T) {
	cfg := loadConfig(t, nil, "keys_only")
	out := confmap.New()
	require.NoError(t, out.Marshal(cfg))
	raw := out.ToStringMap()
	assert.Equal(t, "[REDACTED]", raw["secret_key"])
	assert.Equal(t, "[REDACTED]", raw["public_key"])
}
