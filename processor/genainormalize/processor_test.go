package genainormalize

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

func TestFactoryLifecycle(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, Type, f.Type())
	assert.Equal(t, stability, f.TracesStability())
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), buildOpenInference()))
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestFactoryRefusesBadConfig(t *testing.T) {
	_, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), &Config{Conventions: []string{"nope"}}, consumertest.NewNop())
	assert.ErrorContains(t, err, `unknown convention "nope"`)
}

func TestNextErrorIsReturned(t *testing.T) {
	boom := errors.New("downstream refused")
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), consumertest.NewErr(boom))
	require.NoError(t, err)
	assert.ErrorIs(t, p.ConsumeTraces(context.Background(), ptrace.NewTraces()), boom)
}
