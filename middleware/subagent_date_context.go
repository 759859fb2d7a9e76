package middleware

import (
	"context"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// NameSubagentDateContext is DeerFlow's SubagentDateContextMiddleware.
const NameSubagentDateContext = "SubagentDateContextMiddleware"

// SubagentDateContextMiddleware gives a subagent the date (before_agent, DeerFlow's
// subagent chain): the lead agent's date reminder by ID swap on the subagent's task prompt, never the
// user's memory — a subagent works for the lead agent, not the user, and DynamicContext is
// not in its chain.
type SubagentDateContextMiddleware struct {
	date *DynamicContextMiddleware
}

// NewSubagentDateContextMiddleware returns the middleware.
func NewSubagentDateContextMiddleware(clock Clock) *SubagentDateContextMiddleware {
	return &SubagentDateContextMiddleware{date: NewDynamicContextMiddleware(clock, nil, MemorySettings{})}
}

// Name implements agent.Middleware.
func (*SubagentDateContextMiddleware) Name() string { return NameSubagentDateContext }

// BeforeAgent implements agent.BeforeAgentHook.
func (m *SubagentDateContextMiddleware) BeforeAgent(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	return m.date.BeforeAgent(ctx, rt, st)
}
