package langsmith

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/internal/envconfig"
)

func noEnv() envconfig.Lookup { return envconfig.FromMap(nil) }

func TestDefaultConfig(t *testing.T) {
	cfg := newDefaultConfig(noEnv())
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	assert.False(t, cfg.Enabled)
	assert.Equal(t, DefaultEndpoint, cfg.ClientConfig.Endpoint)
	assert.Equal(t, DefaultProject, cfg.Project)
	assert.Equal(t, DefaultTimeout, cfg.ClientConfig.Timeout)
	assert.Equal(t, configcompression.TypeZstd, cfg.ClientConfig.Compression)
	assert.Equal(t, DefaultMaxCachedSpans, cfg.MaxCachedSpans)
	assert.True(t, cfg.QueueConfig.HasValue())
	assert.True(t, cfg.RetryConfig.Enabled)
	assert.NoError(t, cfg.Validate(), "disabled by default, so valid without a key")
}

// DeerFlow's test_tracing_config.py cases that concern
// LangSmith, plus the rules of docs/contract.md#exporters.
func TestEnvironmentDefaults(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		key     string
		project string
		endpt   string
		err     string
	}{
		{
			name: "prefers LANGSMITH env names",
			env: map[string]string{
				"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "ls-key", "LANGSMITH_PROJECT": "smith-project", "LANGSMITH_ENDPOINT": "https://smith.example.com",
				"LANGCHAIN_TRACING_V2": "false", "LANGCHAIN_API_KEY": "lc-key", "LANGCHAIN_PROJECT": "chain-project", "LANGCHAIN_ENDPOINT": "https://chain.example.com",
			},
			enabled: true, key: "ls-key", project: "smith-project", endpt: "https://smith.example.com",
		},
		{
			name: "falls back to LANGCHAIN env names",
			env: map[string]string{
				"LANGCHAIN_TRACING_V2": "true", "LANGCHAIN_API_KEY": "lc-key", "LANGCHAIN_PROJECT": "chain-project", "LANGCHAIN_ENDPOINT": "https://chain.example.com",
			},
			enabled: true, key: "lc-key", project: "chain-project", endpt: "https://chain.example.com",
		},
		{
			name:    "LANGSMITH_TRACING=false overrides LANGCHAIN_TRACING_V2=true",
			env:     map[string]string{"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "true", "LANGSMITH_API_KEY": "k"},
			enabled: false, key: "k", project: DefaultProject, endpt: DefaultEndpoint,
		},
		{
			name:    "defaults when project not set (yes is truthy)",
			env:     map[string]string{"LANGSMITH_TRACING": "yes", "LANGSMITH_API_KEY": "k"},
			enabled: true, key: "k", project: "deer-flow", endpt: DefaultEndpoint,
		},
		{
			name:    "LANGCHAIN_TRACING is the last fallback",
			env:     map[string]string{"LANGCHAIN_TRACING": "ON", "LANGCHAIN_API_KEY": "k"},
			enabled: true, key: "k", project: DefaultProject, endpt: DefaultEndpoint,
		},
		{
			name:    "whitespace-only values count as absent",
			env:     map[string]string{"LANGSMITH_TRACING": "  ", "LANGCHAIN_TRACING_V2": "1", "LANGSMITH_API_KEY": " ", "LANGCHAIN_API_KEY": " k2 ", "LANGSMITH_PROJECT": "\t"},
			enabled: true, key: "k2", project: DefaultProject, endpt: DefaultEndpoint,
		},
		{
			name:    "other text is false",
			env:     map[string]string{"LANGSMITH_TRACING": "enabled", "LANGCHAIN_TRACING_V2": "true"},
			enabled: false, project: DefaultProject, endpt: DefaultEndpoint,
		},
		{
			name:    "enabled without a key fails with DeerFlow's message",
			env:     map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_PROJECT": "p"},
			enabled: true, project: "p", endpt: DefaultEndpoint,
			err: "LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set.",
		},
		{
			name:    "disabled without a key is not validated",
			env:     map[string]string{"LANGCHAIN_TRACING_V2": "0"},
			enabled: false, project: DefaultProject, endpt: DefaultEndpoint,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newDefaultConfig(envconfig.FromMap(tc.env))
			assert.Equal(t, tc.enabled, cfg.Enabled)
			assert.Equal(t, configopaque.String(tc.key), cfg.APIKey)
			assert.Equal(t, tc.project, cfg.Project)
			assert.Equal(t, tc.endpt, cfg.ClientConfig.Endpoint)
			err := cfg.Validate()
			if tc.err == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Equal(t, tc.err, err.Error())
			}
		})
	}
}

func load(t *testing.T, env map[string]string, id string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName("langsmith", id).String())
	require.NoError(t, err)
	cfg := newDefaultConfig(envconfig.FromMap(env))
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	env := map[string]string{"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "env-key", "LANGSMITH_PROJECT": "env-project", "LANGSMITH_ENDPOINT": "https://env.example.com"}

	// an empty section keeps every environment default
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("langsmith")
	require.NoError(t, err)
	cfg := newDefaultConfig(envconfig.FromMap(env))
	require.NoError(t, sub.Unmarshal(cfg))
	assert.Equal(t, newDefaultConfig(envconfig.FromMap(env)), cfg)

	// explicit YAML overrides the environment, field by field
	full := load(t, env, "full")
	want := newDefaultConfig(envconfig.FromMap(env))
	want.ClientConfig.Endpoint = "https://langsmith.example.com/api/v1"
	want.ClientConfig.Timeout = 5 * time.Second
	want.ClientConfig.Compression = configcompression.TypeGzip
	want.APIKey = "lsv2_pt_yaml_secret"
	want.Project = "agentmeter"
	want.TenantID = "1f5d2c3e-0000-4000-8000-000000000001"
	want.Enabled = true
	want.CheckCredentials = true
	want.MaxCachedSpans = 500
	q := want.QueueConfig.Get()
	q.NumConsumers = 2
	q.QueueSize = 50
	q.Sizer = exporterhelper.RequestSizerTypeRequests // queue_size without sizer: stock meaning
	want.enabled.Settle(confmap.NewFromStringMap(map[string]any{"enabled": true}), &want.Enabled)
	want.RetryConfig.InitialInterval = time.Second
	want.RetryConfig.MaxElapsedTime = time.Minute
	assert.Equal(t, want, full)
	require.NoError(t, full.Validate())
	require.NoError(t, confmap.Validate(full))

	disabled := load(t, env, "disabled")
	assert.False(t, disabled.Enabled, "enabled: false beats LANGSMITH_TRACING=true")
	assert.NoError(t, disabled.Validate())
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	cfg := load(t, nil, "bad")
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{
		"max_cached_spans must not be negative",
		"LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set.",
		"endpoint must be an http or https URL",
		"project must not be empty",
		`compression must be zstd, gzip or none, got "snappy"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "ftp//nowhere", "the endpoint is never echoed")
	assert.Len(t, strings.Split(err.Error(), "\n"), 5)
}

// An api_key in the YAML is an intent to export, as keys are for Langfuse; an explicit
// enabled: or an explicit environment switch still decides.
func TestKeyInYAMLEnables(t *testing.T) {
	cfg := load(t, nil, "key_only")
	assert.True(t, cfg.Enabled, "no enabled:, no LANGSMITH_TRACING: the key enables")
	assert.NoError(t, cfg.Validate())

	cfg = load(t, map[string]string{"LANGSMITH_TRACING": "false"}, "key_only")
	assert.False(t, cfg.Enabled, "LANGSMITH_TRACING=false keeps it off")
	assert.Contains(t, cfg.disabledReason(), `LANGSMITH_TRACING (or LANGCHAIN_TRACING_V2, LANGCHAIN_TRACING) is "false"`)

	cfg = load(t, map[string]string{"LANGCHAIN_TRACING_V2": "0"}, "key_only")
	assert.False(t, cfg.Enabled, "the fallback variables count too")

	cfg = load(t, map[string]string{"LANGSMITH_TRACING": "true"}, "key_disabled")
	assert.False(t, cfg.Enabled, "enabled: false wins")
	assert.Equal(t, "enabled: false in the configuration", cfg.disabledReason())

	cfg = load(t, nil, "disabled")
	assert.False(t, cfg.Enabled)
	assert.Equal(t, "enabled: false in the configuration", cfg.disabledReason())

	cfg = load(t, nil, "empty")
	assert.False(t, cfg.Enabled)
	assert.Equal(t, "no enabled: true, no api_key in the configuration, and LANGSMITH_TRACING (or LANGCHAIN_TRACING_V2, LANGCHAIN_TRACING) is not set", cfg.disabledReason())
}

func TestSecretNeverPrinted(t *testing.T) {
	cfg := load(t, nil, "full")
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprint(cfg.APIKey)} {
		assert.NotContains(t, s, "lsv2_pt_yaml_secret")
	}
}
