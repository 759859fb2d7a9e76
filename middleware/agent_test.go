package middleware

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// runAgent runs a real agent loop on p with mws and the ls tool (no sandbox needed: the
// tool's error becomes a ToolMessage).
func runAgent(t *testing.T, p model.Provider, mws []agent.Middleware, prompt string, tools ...tool.Tool) *agent.Result {
	t.Helper()
	if len(tools) == 0 {
		tools = []tool.Tool{tool.Ls{}}
	}
	a, err := agent.New(agent.Config{Model: model.Wrap(p, model.Info{Name: "m", Provider: "test", Model: "test-model"}),
		Tools: tools, Middlewares: mws})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), agent.Input{ThreadID: "thread-1", RunID: "run-1", UserID: "user-1",
		Messages: []message.Message{message.Human(prompt)}})
	require.NoError(t, err)
	return res
}
