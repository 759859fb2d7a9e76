package middleware

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

func TestToolProgressHintThenBlock(t *testing.T) {
	m, err := NewToolProgressMiddleware(DefaultToolProgressConfig())
	require.NoError(t, err)
	ctx, rt := context.Background(), testRuntime()
	_, _ = m.BeforeAgent(ctx, rt, st())
	ran := 0
	same := func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
		ran++
		return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, "no results found for this query", "")}, nil
	}
	var seen []message.Message
	h := func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	for i := range 3 {
		_, err := m.WrapToolCall(ctx, &agent.ToolRequest{Call: call(fmt.Sprint(i), "web_search", nil), Runtime: rt}, same)
		require.NoError(t, err)
	}
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	require.Len(t, seen, 2, "a hint after 3 near-identical results")
	assert.Equal(t, "tool_progress", seen[1].Name)
	assert.Contains(t, seen[1].Content, "web_search")
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	assert.Len(t, seen, 1, "hints are injected once")
	for i := range 2 {
		_, _ = m.WrapToolCall(ctx, &agent.ToolRequest{Call: call(fmt.Sprint(10+i), "web_search", nil), Runtime: rt}, same)
	}
	assert.Equal(t, 5, ran)
	resp, err := m.WrapToolCall(ctx, &agent.ToolRequest{Call: call("x", "web_search", nil), Runtime: rt}, same)
	require.NoError(t, err)
	assert.Equal(t, 5, ran, "blocked after the escalation")
	assert.Equal(t, message.ToolError, resp.Message.Status)

	// Progressing results never trip it; other tools are independent.
	rt2 := testRuntime()
	n := 0
	varying := func(_ context.Context, req *agent.ToolRequest) (*agent.ToolResponse, error) {
		n++
		return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, fmt.Sprintf("page %d: fresh facts number %d", n, n*7), "")}, nil
	}
	for i := range 8 {
		_, _ = m.WrapToolCall(ctx, &agent.ToolRequest{Call: call(fmt.Sprint(i), "web_fetch", nil), Runtime: rt2}, varying)
	}
	assert.Equal(t, 8, n)
	assert.Equal(t, 1.0, Jaccard(wordSet("A b"), wordSet("b a")))
	assert.ErrorContains(t, (&ToolProgressConfig{StagnationThreshold: 0, Escalation: 1, Similarity: 2}).Validate(), "similarity must be in (0, 1]")
}

// test_tool_progress_middleware_is_outer_relative_to_error_handling.
func TestToolProgressOuterRelativeToErrorHandling(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ToolProgress.Enabled = true
	chain, err := BuildMiddlewares(Options{Config: cfg})
	require.NoError(t, err)
	names := Names(chain)
	assert.Less(t, slices.Index(names, NameToolProgress), slices.Index(names, NameToolErrorHandling))
	assert.Equal(t, slices.Index(names, NameReadBeforeWrite)+1, slices.Index(names, NameToolProgress))
	i, j := slices.Index(names, NameToolProgress), slices.Index(names, NameToolErrorHandling)
	chain[i], chain[j] = chain[j], chain[i]
	assert.ErrorContains(t, AssertOrdering(chain), "ToolProgressMiddleware before ToolErrorHandlingMiddleware")
}
