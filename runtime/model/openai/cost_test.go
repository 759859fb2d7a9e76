package openai

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/internal/providertest"
)

// OpenRouter reports the call's cost in usage.cost: it is kept as the provider's figure
// (response_metadata provider_cost_usd), which the span and the journal use instead of
// the price table.
func TestOpenRouterUsageCostKept(t *testing.T) {
	f := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w,
			`{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`,
			`{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"anthropic/claude-sonnet-4.5","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"cost":0.00045}}`)
	}}
	_, m := start(t, f, nil)
	resp, err := m.Generate(context.Background(), &model.Request{Messages: conversation})
	require.NoError(t, err)
	c, ok := resp.Message.ProviderCostUSD()
	require.True(t, ok)
	assert.Equal(t, 0.00045, c)
	assert.Equal(t, 0.00045, resp.Message.ResponseMetadata[message.MetaProviderCostUSD])

	f2 := &providertest.Server{Path: apiPath, Handler: func(w http.ResponseWriter, _ map[string]any) {
		sse(w, `{"id":"c-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}}
	_, m2 := start(t, f2, nil)
	resp, err = m2.Generate(context.Background(), &model.Request{Messages: conversation})
	require.NoError(t, err)
	_, ok = resp.Message.ProviderCostUSD()
	assert.False(t, ok, "no cost field, no provider cost")
}
