package tokenmetrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/configtest"
	"github.com/agentmeter/agentmeter/internal/readmetest"
)

func TestLoadConfig(t *testing.T) {
	configtest.Loads(t, NewFactory(), []configtest.Section{
		{ID: component.NewID(Type), Want: createDefaultConfig()},
		{ID: component.NewIDWithName(Type, "custom"), Want: &Config{
			Metrics:            MetricSets{Agentmeter: true},
			MaxSeries:          500,
			FlushInterval:      250 * time.Millisecond,
			ResourceAttributes: []string{"service.name", "deployment.environment.name"},
			RememberedCalls:    0,
		}},
		{ID: component.NewIDWithName(Type, "semconv_only"), Want: &Config{
			Metrics:            MetricSets{GenAIInference: true},
			MaxSeries:          10_000,
			FlushInterval:      time.Second,
			ResourceAttributes: []string{"service.name"},
			RememberedCalls:    500_000,
		}},
	})
}

func TestValidate(t *testing.T) {
	configtest.Refuses(t, createDefaultConfig,
		configtest.BadCase("every set off", func(c *Config) { c.Metrics = MetricSets{} },
			"metrics: every metric set is off (agentmeter, gen_ai_inference, gen_ai_token_usage); turn at least one on"),
		configtest.BadCase("zero max_series", func(c *Config) { c.MaxSeries = 0 },
			"max_series must be positive, got 0"),
		configtest.BadCase("huge max_series", func(c *Config) { c.MaxSeries = 2_000_000 },
			"max_series must be at most 1000000, got 2000000"),
		configtest.BadCase("negative flush_interval", func(c *Config) { c.FlushInterval = -time.Second },
			"flush_interval must not be negative, got -1s"),
		configtest.BadCase("slow flush_interval", func(c *Config) { c.FlushInterval = 2 * time.Minute },
			"flush_interval must be at most 1m0s, got 2m0s"),
		configtest.BadCase("empty resource attribute", func(c *Config) { c.ResourceAttributes = []string{"service.name", ""} },
			"resource_attributes[1] is empty"),
		configtest.BadCase("repeated resource attribute", func(c *Config) { c.ResourceAttributes = []string{"service.name", "service.name"} },
			`resource_attributes[1]: "service.name" is listed twice`),
		configtest.BadCase("negative remembered_calls", func(c *Config) { c.RememberedCalls = -1 },
			"remembered_calls must be between 0 and 10000000, got -1"),
		configtest.BadCase("huge remembered_calls", func(c *Config) { c.RememberedCalls = 20_000_000 },
			"remembered_calls must be between 0 and 10000000, got 20000000"),
		configtest.BadCase("everything at once", func(c *Config) {
			c.Metrics, c.MaxSeries, c.ResourceAttributes, c.RememberedCalls = MetricSets{}, -1, []string{""}, -1
		}, "metrics: every metric set is off", "max_series must be positive", "resource_attributes[0] is empty", "remembered_calls must be"),
	)
	assert.NoError(t, createDefaultConfig().Validate())
	// no resource attributes at all is valid: every series then shares one empty resource
	cfg := createDefaultConfig()
	cfg.ResourceAttributes = nil
	assert.NoError(t, cfg.Validate())
}

// README.md's configuration table gives the defaults createDefaultConfig holds.
func TestREADMEDefaults(t *testing.T) {
	readmetest.Defaults(t, "README.md", func() component.Config { return createDefaultConfig() }, 6)
}
