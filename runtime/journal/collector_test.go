package journal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/message"
)

func gen(in, out, total int64, meta map[string]any) *message.Message {
	m := message.AI("x")
	m.UsageMetadata = &message.UsageMetadata{InputTokens: in, OutputTokens: out, TotalTokens: total}
	m.ResponseMetadata = meta
	return &m
}

// DeerFlow's test_subagent_token_collector.py
func TestCollector(t *testing.T) {
	c := NewTokenCollector("subagent:test")
	c.OnLLMEnd("run-1", []*message.Message{gen(100, 50, 150, map[string]any{"model_name": "subagent-model"})})
	recs := c.Snapshot()
	require.Len(t, recs, 1)
	assert.Equal(t, UsageRecord{SourceRunID: "run-1", Caller: "subagent:test", ModelName: "subagent-model", InputTokens: 100, OutputTokens: 50, TotalTokens: 150}, recs[0])

	c = NewTokenCollector("subagent:test")
	c.OnLLMEnd("r", []*message.Message{gen(1, 1, 2, map[string]any{"model": "provider-model"})})
	assert.Equal(t, "provider-model", c.Snapshot()[0].ModelName, "model fallback")

	c = NewTokenCollector("subagent:test")
	c.OnLLMEnd("a", []*message.Message{gen(200, 100, 0, nil)})
	noTotal := message.AI("x")
	noTotal.UsageMetadata = &message.UsageMetadata{InputTokens: 30, OutputTokens: 20}
	c.OnLLMEnd("b", []*message.Message{&noTotal})
	assert.Equal(t, int64(300), c.Snapshot()[0].TotalTokens, "zero total uses input+output")
	assert.Equal(t, int64(50), c.Snapshot()[1].TotalTokens, "missing total uses input+output")
}

func TestCollectorDedupeAndSkips(t *testing.T) {
	c := NewTokenCollector("subagent:test")
	c.OnLLMEnd("same", []*message.Message{gen(10, 5, 15, nil)})
	c.OnLLMEnd("same", []*message.Message{gen(10, 5, 15, nil)})
	assert.Len(t, c.Snapshot(), 1, "dedupe by run id")

	c = NewTokenCollector("subagent:test")
	none := message.AI("x")
	c.OnLLMEnd("n", []*message.Message{&none})
	c.OnLLMEnd("z", []*message.Message{gen(0, 0, 0, nil)})
	c.OnLLMEnd("nil", []*message.Message{nil})
	assert.Empty(t, c.Snapshot(), "no usage, zero usage and empty generations record nothing")

	c = NewTokenCollector("subagent:test")
	c.OnLLMEnd("g", []*message.Message{&none, gen(20, 10, 30, nil)})
	recs := c.Snapshot()
	require.Len(t, recs, 1, "first generation without usage is skipped, later usage recorded")
	assert.Equal(t, int64(30), recs[0].TotalTokens)
}

func TestCollectorOrderCopyAndCacheRead(t *testing.T) {
	c := NewTokenCollector("subagent:test")
	c.OnLLMEnd("r1", []*message.Message{gen(10, 5, 15, nil)})
	withCache := gen(20, 10, 30, nil)
	withCache.UsageMetadata.InputTokenDetails = &message.InputTokenDetails{CacheRead: 20}
	c.OnLLMEnd("r2", []*message.Message{withCache})
	a, b := c.Snapshot(), c.Snapshot()
	assert.Equal(t, a, b)
	a[0].TotalTokens = 999
	assert.Equal(t, int64(15), c.Snapshot()[0].TotalTokens, "snapshot is a copy")
	assert.Equal(t, []int64{15, 30}, []int64{b[0].TotalTokens, b[1].TotalTokens}, "separate records in order")
	assert.Zero(t, b[0].CacheReadTokens)
	assert.Equal(t, int64(20), b[1].CacheReadTokens)
	in, out, total, ok := Sum(b)
	assert.True(t, ok)
	assert.Equal(t, []int64{30, 15, 45}, []int64{in, out, total})
	_, _, _, ok = Sum(nil)
	assert.False(t, ok)
}
