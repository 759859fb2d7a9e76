package middleware

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// KwargSafetyTermination stamps a rewritten response (DeerFlow's SafetyFinishReasonMiddleware).
const KwargSafetyTermination = "safety_termination"

// SafetyDetection is one detector hit.
type SafetyDetection struct {
	Detector, Field, Value string
}

// SafetyDetector inspects an AI message for a provider safety stop.
type SafetyDetector interface {
	Name() string
	Detect(m message.Message) (SafetyDetection, bool)
}

type valueSetDetector struct {
	name, field string
	values      map[string]bool
	fold        bool
}

func (d valueSetDetector) Name() string { return d.name }

func (d valueSetDetector) Detect(m message.Message) (SafetyDetection, bool) {
	v, ok := metaString(m, d.field)
	if !ok {
		return SafetyDetection{}, false
	}
	key := v
	if d.fold {
		key = strings.ToLower(v)
	}
	if !d.values[key] {
		return SafetyDetection{}, false
	}
	return SafetyDetection{Detector: d.name, Field: d.field, Value: v}, true
}

// DefaultSafetyDetectors are the three built-ins: OpenAI-compatible content_filter (plus
// extra values, case-insensitive), Anthropic refusal, Gemini safety finish reasons.
func DefaultSafetyDetectors(extra ...string) []SafetyDetector {
	openai := map[string]bool{"content_filter": true}
	for _, e := range extra {
		openai[strings.ToLower(strings.TrimSpace(e))] = true
	}
	gemini := map[string]bool{}
	for _, v := range []string{"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"} {
		gemini[v] = true
	}
	return []SafetyDetector{
		valueSetDetector{name: "openai_compatible_content_filter", field: "finish_reason", values: openai, fold: true},
		valueSetDetector{name: "anthropic_refusal", field: "stop_reason", values: map[string]bool{"refusal": true}},
		valueSetDetector{name: "gemini_safety", field: "finish_reason", values: gemini},
	}
}

// SafetyFinishReasonMiddleware strips the tool calls of a safety-terminated response
// before anyone else sees them. It is registered after LoopDetection, TokenBudget,
// SubagentLimit and custom middlewares, so with reverse after_model dispatch it runs
// first: truncated tool calls never trip loop detection, budgets or the tool node
// (DeerFlow's SafetyFinishReasonMiddleware, which DeerFlow puts near the end).
type SafetyFinishReasonMiddleware struct {
	detectors []SafetyDetector
}

// NewSafetyFinishReasonMiddleware returns the middleware with the built-in detectors.
func NewSafetyFinishReasonMiddleware(cfg SafetyFinishReasonConfig) *SafetyFinishReasonMiddleware {
	return &SafetyFinishReasonMiddleware{detectors: DefaultSafetyDetectors(cfg.ExtraFinishReasons...)}
}

// Name implements agent.Middleware.
func (*SafetyFinishReasonMiddleware) Name() string { return NameSafetyFinishReason }

func (m *SafetyFinishReasonMiddleware) detect(msg message.Message) (SafetyDetection, bool) {
	for _, d := range m.detectors {
		if hit, ok := safeDetect(d, msg); ok {
			return hit, true
		}
	}
	return SafetyDetection{}, false
}

// safeDetect ignores a panicking detector (DeerFlow: a raising detector is skipped).
func safeDetect(d SafetyDetector, msg message.Message) (hit SafetyDetection, ok bool) {
	defer func() {
		if recover() != nil {
			hit, ok = SafetyDetection{}, false
		}
	}()
	return d.Detect(msg)
}

// AfterModel implements agent.AfterModelHook.
func (m *SafetyFinishReasonMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok {
		return nil, nil
	}
	if _, done := last.AdditionalKwargs[KwargSafetyTermination]; done {
		return nil, nil // idempotent
	}
	_, rawCalls := last.AdditionalKwargs["tool_calls"]
	_, fnCall := last.AdditionalKwargs["function_call"]
	hasCalls := len(last.ToolCalls) > 0 || rawCalls || fnCall
	blank := strings.TrimSpace(last.Content) == ""
	if !hasCalls && !blank {
		return nil, nil // visible text without tool calls is left untouched
	}
	hit, ok := m.detect(last)
	if !ok {
		return nil, nil
	}
	names := make([]string, 0, len(last.ToolCalls))
	for _, c := range last.ToolCalls {
		names = append(names, c.Name)
	}
	out := withoutToolCalls(last)
	signal := fmt.Sprintf("%s='%s', detector='%s'", hit.Field, hit.Value, hit.Detector)
	var note string
	if hasCalls {
		note = "The model provider stopped this response with a safety-related signal (" + signal + "). Any tool calls produced in this turn were suppressed and not executed."
	} else {
		note = "The model provider stopped this response with a safety-related signal (" + signal + ") and returned no content. Please rephrase your request or start a new conversation."
	}
	if blank {
		out.Content = note
	} else {
		out.Content = appendText(out.Content, note)
	}
	if out.AdditionalKwargs == nil {
		out.AdditionalKwargs = map[string]any{}
	}
	out.AdditionalKwargs[KwargSafetyTermination] = map[string]any{
		"detector": hit.Detector, "reason_field": hit.Field, "reason_value": hit.Value,
		"suppressed_tool_call_count": len(last.ToolCalls), "suppressed_tool_call_names": names, "extras": map[string]any{},
	}
	if rt != nil && rt.Context != nil {
		rt.Context.SetStopReason(agent.StopSafetyCapped)
	}
	event := map[string]any{"type": "safety_termination", "detector": hit.Detector, "reason_field": hit.Field,
		"reason_value": hit.Value, "suppressed_tool_call_count": len(last.ToolCalls)}
	emit(rt, "safety_termination", event)
	record(rt, "safety_termination", NameSafetyFinishReason, "after_model", "suppress", map[string]any{
		"detector": hit.Detector, "reason_value": hit.Value, "suppressed_tool_call_names": names})
	return &state.Update{Messages: []message.Message{out}}, nil
}
