package attrsplit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/pipeline"

	"github.com/agentmeter/agentmeter/internal/readmetest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(Type.String(), name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestLoadConfig(t *testing.T) {
	cfg := loadConfig(t, "placement")
	assert.Equal(t, &Config{
		Attribute: "langsmith.span.dotted_order",
		Pipelines: Pipelines{
			All:     []pipeline.ID{pipeline.NewIDWithName(pipeline.SignalTraces, "stream")},
			With:    []pipeline.ID{},
			Without: []pipeline.ID{pipeline.NewIDWithName(pipeline.SignalTraces, "unplaced"), pipeline.NewIDWithName(pipeline.SignalTraces, "archive")},
		},
	}, cfg)
	require.NoError(t, cfg.Validate())
}

// Every problem is reported at once, each under its key.
func TestValidateNamesEveryProblem(t *testing.T) {
	err := loadConfig(t, "bad").Validate()
	require.Error(t, err)
	for _, want := range []string{
		"attribute: the span attribute key to split by is required",
		"pipelines::all[1]: metrics/b is a metrics pipeline",
		"pipelines::with[0]: traces/a is listed under all already",
	} {
		assert.ErrorContains(t, err, want)
	}

	err = loadConfig(t, "").Validate()
	require.Error(t, err)
	assert.ErrorContains(t, err, "attribute:")
	assert.ErrorContains(t, err, "pipelines: name at least one pipeline")
}

// The README's table gives the defaults the factory has.
func TestReadmeDefaults(t *testing.T) {
	readmetest.Defaults(t, "README.md", func() component.Config { return createDefaultConfig() }, 3)
}
