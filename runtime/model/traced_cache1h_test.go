package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// The 1-hour part of the cache writes goes on the chat span, where the collector's cost
// step prices it at the 1-hour rate.
func TestTracedCacheWrite1hOnSpan(t *testing.T) {
	ctx, exp := setup(t)
	ai := message.AI("ok")
	um := message.UsageFromGenAI(genai.Usage{Input: 3010, Output: 3, CacheCreation: 3000})
	um.InputTokenDetails.CacheCreation1h = 2000
	ai.UsageMetadata = &um
	m := Wrap(&stubProvider{resp: &Response{Message: ai, Model: "claude-sonnet-4-5"}}, Info{Name: "c", Provider: "anthropic", Model: "claude-sonnet-4-5"})
	_, err := m.Generate(ctx, &Request{Messages: []message.Message{message.Human("hi")}})
	require.NoError(t, err)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	got := attrs(spans[0].Attributes)
	assert.Equal(t, int64(2000), got[genai.AttrUsageCacheCreat1h])
	assert.Equal(t, int64(3000), got[genai.AttrUsageCacheCreat])
}

// A provider-reported cost goes on the span as agentmeter.cost.usd with source provider,
// which the collector's cost step keeps.
func TestTracedProviderCostOnSpan(t *testing.T) {
	ctx, exp := setup(t)
	ai := message.AI("ok")
	um := message.UsageFromGenAI(genai.Usage{Input: 100, Output: 10})
	ai.UsageMetadata = &um
	ai.ResponseMetadata = map[string]any{message.MetaProviderCostUSD: 0.00045}
	m := Wrap(&stubProvider{resp: &Response{Message: ai, Model: "anthropic/claude-sonnet-4.5"}}, Info{Name: "r", Provider: "openai", Model: "anthropic/claude-sonnet-4.5"})
	_, err := m.Generate(ctx, &Request{Messages: []message.Message{message.Human("hi")}})
	require.NoError(t, err)
	got := attrs(exp.GetSpans()[0].Attributes)
	assert.Equal(t, 0.00045, got[genai.AttrCostTotal])
	assert.Equal(t, genai.CostSourceProvider, got[genai.AttrCostSource])
}
