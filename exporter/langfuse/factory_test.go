package langfuse

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "langfuse", f.Type().String())
	assert.Equal(t, component.StabilityLevelAlpha, f.TracesStability())
}

// Start and shutdown of both kinds of exporter, enabled and disabled, leave nothing
// running (goleak in TestMain).
func TestLifecycle(t *testing.T) {
	srv := langfusefake.New(t)
	for name, cfg := range map[string]*Config{
		"disabled": newConfig(envconfig.FromMap(nil)),
		"enabled":  testConfig(srv),
		"enabled_from_env": newConfig(envconfig.FromMap(map[string]string{
			"LANGFUSE_TRACING": "on", "LANGFUSE_PUBLIC_KEY": srv.PublicKey,
			"LANGFUSE_SECRET_KEY": srv.SecretKey, "LANGFUSE_BASE_URL": srv.URL,
		})),
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, cfg.Validate())
			exp, err := newFactory(envconfig.FromMap(nil)).CreateTraces(context.Background(),
				exportertest.NewNopSettings(componentType), cfg)
			require.NoError(t, err)
			require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
			require.NoError(t, exp.ConsumeTraces(context.Background(), traceBatch(1)))
			require.NoError(t, exp.Shutdown(context.Background()))
		})
	}
	assert.Len(t, srv.Observations(), 18, "the two enabled exporters sent, the disabled one did not")
}
