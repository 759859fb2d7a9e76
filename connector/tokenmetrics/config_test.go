package tokenmetrics

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/agentmeter/agentmeter/internal/readmetest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tt := range []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(Type), createDefaultConfig()},
		{component.NewIDWithName(Type, "custom"), &Config{
			Metrics:            MetricSets{Agentmeter: true},
			MaxSeries:          500,
			FlushInterval:      250 * time.Millisecond,
			ResourceAttributes: []string{"service.name", "deployment.environment.name"},
		}},
		{component.NewIDWithName(Type, "semconv_only"), &Config{
			Metrics:            MetricSets{GenAIInference: true},
			MaxSeries:          10_000,
			FlushInterval:      time.Second,
			ResourceAttributes: []string{"service.name"},
		}},
	} {
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

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"every set off", func(c *Config) { c.Metrics = MetricSets{} },
			[]string{"metrics: every metric set is off (agentmeter, gen_ai_inference, gen_ai_token_usage); turn at least one on"}},
		{"zero max_series", func(c *Config) { c.MaxSeries = 0 }, []string{"max_series must be positive, got 0"}},
		{"huge max_series", func(c *Config) { c.MaxSeries = 2_000_000 }, []string{"max_series must be at most 1000000, got 2000000"}},
		{"negative flush_interval", func(c *Config) { c.FlushInterval = -time.Second }, []string{"flush_interval must not be negative, got -1s"}},
		{"slow flush_interval", func(c *Config) { c.FlushInterval = 2 * time.Minute }, []string{"flush_interval must be at most 1m0s, got 2m0s"}},
		{"empty resource attribute", func(c *Config) { c.ResourceAttributes = []string{"service.name", ""} },
			[]string{"resource_attributes[1] is empty"}},
		{"repeated resource attribute", func(c *Config) { c.ResourceAttributes = []string{"service.name", "service.name"} },
			[]string{`resource_attributes[1]: "service.name" is listed twice`}},
		{"everything at once", func(c *Config) { c.Metrics, c.MaxSeries, c.ResourceAttributes = MetricSets{}, -1, []string{""} },
			[]string{"metrics: every metric set is off", "max_series must be positive", "resource_attributes[0] is empty"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			tt.mod(cfg)
			err := cfg.Validate()
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	assert.NoError(t, createDefaultConfig().Validate())
	// no resource attributes at all is valid: every series then shares one empty resource
	cfg := createDefaultConfig()
	cfg.ResourceAttributes = nil
	assert.NoError(t, cfg.Validate())
}

// README.md's configuration table gives the defaults createDefaultConfig holds.
func TestREADMEDefaults(t *testing.T) {
	readmetest.Defaults(t, "README.md", func() component.Config { return createDefaultConfig() }, 5)
}
