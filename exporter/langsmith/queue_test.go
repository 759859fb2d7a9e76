package langsmith

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// A sending_queue written for the stock exporters, {queue_size: 5000}, keeps its stock
// meaning: 5000 requests. While LangSmith is down, twenty batches of some kilobytes each
// (far over 5000 bytes) are all queued at once, and all arrive once it is back.
func TestStockQueueSizeCountsRequests(t *testing.T) {
	fake := newFake(t)
	cfg := newDefaultConfig(envconfig.FromMap(nil))
	require.NoError(t, cfg.Unmarshal(confmap.NewFromStringMap(map[string]any{
		"endpoint":         fake.URL,
		"api_key":          testKey,
		"sending_queue":    map[string]any{"queue_size": 5000},
		"retry_on_failure": map[string]any{"initial_interval": "10ms", "max_interval": "50ms"},
	})))
	require.NoError(t, cfg.Validate())
	q := cfg.QueueConfig.Get()
	assert.Equal(t, exporterhelper.RequestSizerTypeRequests, q.Sizer)
	assert.EqualValues(t, 5000, q.QueueSize)

	exp, err := NewFactory().CreateTraces(context.Background(), exportertest.NewNopSettings(componentType), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	fake.SetDown(http.StatusServiceUnavailable)
	const batches = 20
	for i := range batches {
		td, _ := fakevendor.AgentTrace(byte(i), base)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := exp.ConsumeTraces(ctx, td)
		cancel()
		require.NoError(t, err, "batch %d is queued: the queue counts requests, not bytes", i)
	}
	fake.SetDown(0)
	deadline := time.Now().Add(30 * time.Second)
	for fake.RunCount() < batches*8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Equal(t, batches*8, fake.RunCount(), "every queued span arrived")
	assert.Empty(t, fake.Violations())
}
