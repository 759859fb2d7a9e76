package middleware

import (
	"context"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// TerminalResponse constants (as in DeerFlow).
const (
	TerminalResponseFallback = "The model completed the tool run but returned no final response, including after one automatic retry. Please try again or use a different model."
	terminalRecoveryPrompt   = "You ran tools but did not write a final answer. Write the final answer for the user now, based on the tool results above."
	terminalRecoveryName     = "terminal_response_recovery"
	terminalRunKey           = "middleware.terminal_response"
)

type terminalRunState struct {
	retried bool
	pending bool
}

// TerminalResponseMiddleware recovers an empty answer after a tool run: the first time in
// a run it removes the empty AI message and jumps back to the model with a hidden
// recovery prompt; the second time it replaces the message with a visible fallback flagged
// deerflow_error_fallback.
type TerminalResponseMiddleware struct{}

// NewTerminalResponseMiddleware returns the middleware.
func NewTerminalResponseMiddleware() *TerminalResponseMiddleware {
	return &TerminalResponseMiddleware{}
}

// Name implements agent.Middleware.
func (*TerminalResponseMiddleware) Name() string { return NameTerminalResponse }

func (*TerminalResponseMiddleware) run(rt *agent.Runtime) *terminalRunState {
	return runScoped(rt, terminalRunKey, func() *terminalRunState { return &terminalRunState{} })
}

// BeforeAgent resets the run's retry budget.
func (m *TerminalResponseMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	*m.run(rt) = terminalRunState{}
	return nil, nil
}

// AfterAgent clears the run's state.
func (m *TerminalResponseMiddleware) AfterAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	*m.run(rt) = terminalRunState{}
	return nil, nil
}

// AfterModel implements agent.AfterModelHook (can jump to the model).
func (m *TerminalResponseMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok || strings.TrimSpace(last.Content) != "" || hasToolIntent(last) || kwargBool(last, message.KwargErrorFallback) {
		return nil, nil
	}
	// A ToolMessage must follow the latest real user message (this turn ran tools).
	user := reminderTarget(st.Messages)
	if user < 0 {
		for i := len(st.Messages) - 1; i >= 0; i-- {
			if st.Messages[i].IsHuman() && !isReminder(st.Messages[i]) {
				user = i
				break
			}
		}
	}
	if user < 0 {
		return nil, nil
	}
	ranTools := false
	for _, msg := range st.Messages[user+1:] {
		if msg.IsTool() {
			ranTools = true
			break
		}
	}
	if !ranTools {
		return nil, nil
	}
	rs := m.run(rt)
	if !rs.retried {
		rs.retried, rs.pending = true, true
		return &state.Update{RemoveMessageIDs: []string{last.ID}, JumpTo: state.JumpModel}, nil
	}
	fb := last.Clone()
	fb.Content = TerminalResponseFallback
	if fb.AdditionalKwargs == nil {
		fb.AdditionalKwargs = map[string]any{}
	}
	fb.AdditionalKwargs[message.KwargErrorFallback] = true
	return &state.Update{Messages: []message.Message{fb}}, nil
}

// WrapModelCall appends the hidden recovery prompt to the retried request only.
func (m *TerminalResponseMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	rs := m.run(req.Runtime)
	if !rs.pending {
		return next(ctx, req)
	}
	rs.pending = false
	r := req.Request.Clone()
	r.Messages = append(r.Messages, hiddenHuman(message.NewID(), terminalRecoveryName, terminalRecoveryPrompt))
	return next(ctx, req.WithRequest(r))
}
