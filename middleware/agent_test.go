package middleware

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
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

type orderRecorder struct {
	name string
	log  *[]string
}

func (o orderRecorder) Name() string { return o.name }
func (o orderRecorder) BeforeModel(context.Context, *agent.Runtime, *state.State) (*state.Update, error) {
	*o.log = append(*o.log, "before_model:"+o.name)
	return nil, nil
}
func (o orderRecorder) AfterModel(context.Context, *agent.Runtime, *state.State) (*state.Update, error) {
	*o.log = append(*o.log, "after_model:"+o.name)
	return nil, nil
}
func (o orderRecorder) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	*o.log = append(*o.log, "wrap_model_call:"+o.name)
	return next(ctx, req)
}
func (o orderRecorder) AfterAgent(context.Context, *agent.Runtime, *state.State) (*state.Update, error) {
	*o.log = append(*o.log, "after_agent:"+o.name)
	return nil, nil
}

// The runtime dispatches after_model and after_agent in reverse list order and composes
// wrap_model_call with the first middleware outermost; Hooks reports exactly that.
func TestReverseAfterModelDispatchMatchesHooks(t *testing.T) {
	var log []string
	mws := []agent.Middleware{orderRecorder{"A", &log}, orderRecorder{"B", &log}, orderRecorder{"C", &log}}
	runAgent(t, &scriptedProvider{}, mws, "hi")
	require.Equal(t, []string{
		"before_model:A", "before_model:B", "before_model:C",
		"wrap_model_call:A", "wrap_model_call:B", "wrap_model_call:C",
		"after_model:C", "after_model:B", "after_model:A",
		"after_agent:C", "after_agent:B", "after_agent:A",
	}, log)
	h := Hooks(mws)
	require.Equal(t, []string{"C", "B", "A"}, h.AfterModel)
	require.Equal(t, []string{"A", "B", "C"}, h.WrapModelCall)
	require.Equal(t, []string{"C", "B", "A"}, h.AfterAgent)
}
