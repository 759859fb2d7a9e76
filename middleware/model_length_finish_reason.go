package middleware

import (
	"context"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// ModelLengthFinishReasonMiddleware records stop_reason model_length_capped when a
// terminal answer (visible text, no tool intent) was cut by the output limit
// (finish_reason length / stop_reason max_tokens / finish_reason MAX_TOKENS). It never
// rewrites content and never overwrites an existing stop reason (as in DeerFlow).
type ModelLengthFinishReasonMiddleware struct{}

// NewModelLengthFinishReasonMiddleware returns the middleware.
func NewModelLengthFinishReasonMiddleware() *ModelLengthFinishReasonMiddleware {
	return &ModelLengthFinishReasonMiddleware{}
}

// Name implements agent.Middleware.
func (*ModelLengthFinishReasonMiddleware) Name() string { return NameModelLengthFinishReason }

// AfterModel implements agent.AfterModelHook.
func (*ModelLengthFinishReasonMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok || strings.TrimSpace(last.Content) == "" || hasToolIntent(last) {
		return nil, nil
	}
	fr, _ := metaString(last, "finish_reason")
	sr, _ := metaString(last, "stop_reason")
	if fr != "length" && fr != "MAX_TOKENS" && sr != "max_tokens" {
		return nil, nil
	}
	if rt != nil && rt.Context != nil && rt.Context.SetStopReasonIfEmpty(agent.StopModelLengthCapped) {
		record(rt, "model_length", NameModelLengthFinishReason, "after_model", "capped",
			map[string]any{"thread_id": rt.ThreadID, "run_id": rt.RunID, "message_id": last.ID})
	}
	return nil, nil
}
