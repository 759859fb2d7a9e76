package tokenmetrics

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/agentmeter/agentmeter/genai"
)

// With flush_interval the series changed since the last flush go out together, once per
// interval, with their cumulative values; whatever is still unsent goes out at shutdown.
func TestFlushInterval(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FlushInterval = 20 * time.Millisecond })
	h.c.now = time.Now // the flush loop runs on the real clock
	for i := 0; i < 10; i++ {
		h.send(newTrace("agent").chat("gpt-4o", genai.Usage{Input: 10, Output: 1}, nil).traces())
	}
	require.Eventually(t, func() bool { return len(h.sink.AllMetrics()) > 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Less(t, len(h.sink.AllMetrics()), 10, "batches were flushed together")
	require.Eventually(t, func() bool {
		return total(t, latest(t, h.sink), mTokens, nil) == 110
	}, 5*time.Second, 5*time.Millisecond)

	// shutdown emits what the last interval did not
	sink := new(consumertest.MetricsSink)
	cfg := createDefaultConfig()
	cfg.FlushInterval = time.Hour
	c, err := newConnector(connectortest.NewNopSettings(Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, c.ConsumeTraces(context.Background(), newTrace("agent").chat("o3", genai.Usage{Input: 7, Output: 2}, nil).traces()))
	assert.Empty(t, sink.AllMetrics(), "not before the interval")
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, float64(9), total(t, latest(t, sink), mTokens, nil))
}

// Traces arriving from many goroutines at once (the merge releases from each request's
// goroutine) while the flush loop runs: every call is counted once, and every series'
// points stay in order (latest checks that values never go down).
func TestConcurrentBatchesAndFlushes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FlushInterval = time.Millisecond })
	h.c.now = time.Now
	const workers, perWorker = 4, 200
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < perWorker; i++ {
				model := []string{"gpt-4o", "o3", "claude"}[i%3]
				td := newTrace([]string{"a", "b"}[i%2]).chat(model, genai.Usage{Input: 3, Output: 1, CacheRead: 1}, nil).traces()
				if err := h.c.ConsumeTraces(context.Background(), td); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	require.NoError(t, h.c.Shutdown(context.Background())) // the last flush
	pts := latest(t, h.sink)
	calls := float64(workers * perWorker)
	assert.Equal(t, map[string]float64{"input": 3 * calls, "output": calls, "cache_read": calls}, by(pts, mTokens, "token_type"))
	assert.Equal(t, uint64(workers*perWorker), countWhere(t, pts, mOpInput, nil))
}
