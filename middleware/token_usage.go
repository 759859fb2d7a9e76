package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// TokenUsage keys (DeerFlow's TokenUsageMiddleware).
const (
	// KwargAttribution is additional_kwargs.token_usage_attribution of an AI message.
	KwargAttribution = "token_usage_attribution"
	// KwargUsageAttributed marks a task ToolMessage whose subagent usage was merged.
	KwargUsageAttributed = "subagent_token_usage_attributed"
)

// TokenUsageMiddleware (after_model, as DeerFlow's) merges subagent usage from the
// trailing task ToolMessages onto the AIMessage that dispatched them (by position, marking
// each ToolMessage attributed so replays add nothing), logs the response's usage, writes
// the step attribution onto the last AIMessage and sets agentmeter.step.kind on the
// response's chat span.
type TokenUsageMiddleware struct {
	Logger *slog.Logger
}

// NewTokenUsageMiddleware returns the middleware (its log goes nowhere until Logger is set).
func NewTokenUsageMiddleware() *TokenUsageMiddleware {
	return &TokenUsageMiddleware{Logger: slog.New(slog.DiscardHandler)}
}

// Name implements agent.Middleware.
func (*TokenUsageMiddleware) Name() string { return NameTokenUsage }

// AfterModel implements agent.AfterModelHook.
func (m *TokenUsageMiddleware) AfterModel(ctx context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	msgs := st.Messages
	updates := MergeSubagentUsage(msgs)
	last, isAI := lastAIIsLast(msgs)
	if !isAI {
		return messagesUpdate(updates), nil
	}
	if u := last.UsageMetadata; u != nil && m.Logger != nil {
		line := fmt.Sprintf("LLM token usage: input=%d output=%d total=%d", u.InputTokens, u.OutputTokens, u.TotalTokens)
		if d := u.InputTokenDetails; d != nil && (d.CacheRead != 0 || d.CacheCreation != 0 || d.Audio != 0) {
			b, _ := json.Marshal(d)
			line += " input_token_details=" + string(b)
		}
		if d := u.OutputTokenDetails; d != nil && (d.Reasoning != 0 || d.Audio != 0) {
			b, _ := json.Marshal(d)
			line += " output_token_details=" + string(b)
		}
		m.Logger.Info(line)
	}
	// Merges only touch earlier messages (the walk starts before the last one), so the
	// attribution starts from the last message as it is.
	attr := BuildAttribution(last, st.Todos)
	model.ResponseSpan(ctx).SetAttributes(attribute.String(genai.AttrStepKind, attr["kind"].(string)))
	if !sameJSON(last.AdditionalKwargs[KwargAttribution], attr) {
		updates = append(updates, last.WithKwarg(KwargAttribution, attr))
	}
	return messagesUpdate(updates), nil
}

func messagesUpdate(msgs []message.Message) *state.Update {
	if len(msgs) == 0 {
		return nil
	}
	return &state.Update{Messages: msgs}
}

func sameJSON(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// SubagentUsage validates additional_kwargs.subagent_token_usage: a map with
// input_tokens, output_tokens and total_tokens, each a non-negative integer and not a
// boolean. ok is false on any violation (the message then stays retryable).
func SubagentUsage(kw map[string]any) (in, out, total int64, ok bool) {
	raw, isMap := kw[message.KwargSubagentTokenUsage].(map[string]any)
	if !isMap {
		return 0, 0, 0, false
	}
	vals := [3]int64{}
	for i, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		v, present := raw[k]
		if !present {
			return 0, 0, 0, false
		}
		n, good := nonNegativeInt(v)
		if !good {
			return 0, 0, 0, false
		}
		vals[i] = n
	}
	return vals[0], vals[1], vals[2], true
}

func nonNegativeInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), n >= 0
	case int32:
		return int64(n), n >= 0
	case int64:
		return n, n >= 0
	case float64:
		if n < 0 || n != math.Trunc(n) {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil && i >= 0
	}
	return 0, false // bool, string, nil, ...
}

// MergeSubagentUsage is DeerFlow's subagent-usage merge: walk back over the contiguous
// ToolMessages before the last message; add each unattributed, valid subagent usage onto
// the nearest earlier AIMessage that has the tool call, accumulating parallel dispatches
// into one update, and mark each merged ToolMessage attributed. Updates are returned in
// ascending message order.
func MergeSubagentUsage(msgs []message.Message) []message.Message {
	if len(msgs) < 2 {
		return nil
	}
	pending := map[int]message.Message{}
	for idx := len(msgs) - 2; idx >= 0; idx-- {
		tm := msgs[idx]
		if !tm.IsTool() || strings.TrimSpace(tm.ToolCallID) == "" {
			break
		}
		if b, _ := tm.AdditionalKwargs[KwargUsageAttributed].(bool); b {
			continue
		}
		in, out, total, ok := SubagentUsage(tm.AdditionalKwargs)
		if !ok {
			continue
		}
		d := -1
		for j := idx - 1; j >= 0; j-- {
			if msgs[j].IsAI() && hasToolCallID(msgs[j], tm.ToolCallID) {
				d = j
				break
			}
		}
		if d < 0 {
			continue // no dispatcher: left untouched, retryable
		}
		base, seen := pending[d]
		if !seen {
			base = msgs[d].Clone()
		}
		var u message.UsageMetadata
		if base.UsageMetadata != nil {
			u = base.UsageMetadata.Clone()
		}
		u.InputTokens += in
		u.OutputTokens += out
		u.TotalTokens += total
		base.UsageMetadata = &u
		pending[d] = base
		pending[idx] = tm.WithKwarg(KwargUsageAttributed, true)
	}
	if len(pending) == 0 {
		return nil
	}
	idxs := make([]int, 0, len(pending))
	for i := range pending {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	out := make([]message.Message, len(idxs))
	for i, k := range idxs {
		out[i] = pending[k]
	}
	return out
}

func hasToolCallID(m message.Message, id string) bool {
	for _, tc := range m.ToolCalls {
		if tc.ID == id {
			return true
		}
	}
	return false
}

// BuildAttribution is DeerFlow's attribution annotation: the token_usage_attribution of
// an AI message given the todos before it.
func BuildAttribution(ai message.Message, todos []state.Todo) map[string]any {
	prev := make([]normTodo, 0, len(todos))
	for _, t := range todos {
		prev = append(prev, normaliseTodo(t.Content, t.Status))
	}
	actions := []map[string]any{}
	ids := []string{}
	for _, tc := range ai.ToolCalls {
		id := strings.TrimSpace(tc.ID)
		var idVal any
		if id != "" {
			ids = append(ids, id)
			idVal = id
		}
		name := strings.TrimSpace(tc.Name)
		if name == "" {
			name = "unknown"
		}
		switch name {
		case "write_todos":
			next := normaliseTodoArg(tc.Args["todos"])
			diff := BuildTodoActions(prev, next)
			if len(diff) == 0 {
				actions = append(actions, map[string]any{"kind": "tool", "tool_name": "write_todos", "tool_call_id": idVal})
			}
			for _, a := range diff {
				a["tool_call_id"] = idVal
				actions = append(actions, a)
			}
			prev = next
		case genai.TaskToolName:
			actions = append(actions, map[string]any{"kind": "subagent", "description": argString(tc.Args, "description"),
				"subagent_type": argString(tc.Args, "subagent_type"), "tool_call_id": idVal})
		case "web_search", "image_search":
			actions = append(actions, map[string]any{"kind": "search", "tool_name": name, "query": argString(tc.Args, "query"), "tool_call_id": idVal})
		case "present_files":
			actions = append(actions, map[string]any{"kind": "present_files", "tool_call_id": idVal})
		case ClarificationToolName:
			actions = append(actions, map[string]any{"kind": "clarification", "tool_call_id": idVal})
		default:
			actions = append(actions, map[string]any{"kind": "tool", "tool_name": name, "description": argString(tc.Args, "description"), "tool_call_id": idVal})
		}
	}
	return map[string]any{"version": 1, "kind": inferStepKind(actions, ai.Content), "shared_attribution": len(actions) > 1,
		"tool_call_ids": ids, "actions": actions}
}

// argString trims a string argument; empty or non-string → nil.
func argString(args map[string]any, key string) any {
	s, ok := args[key].(string)
	if !ok {
		return nil
	}
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return s
}

func inferStepKind(actions []map[string]any, content string) string {
	if len(actions) == 1 {
		switch actions[0]["kind"] {
		case "todo_start", "todo_complete", "todo_update", "todo_remove":
			return genai.StepTodoUpdate
		case "subagent":
			return genai.StepSubagentDispatch
		}
	}
	if len(actions) > 0 {
		return genai.StepToolBatch
	}
	// DeerFlow tests the content's truthiness: any non-empty string, whitespace
	// included, is a final answer; only "" is thinking.
	if content != "" {
		return genai.StepFinalAnswer
	}
	return genai.StepThinking
}

type normTodo struct {
	content, status string
}

func normaliseTodo(content, status string) normTodo {
	t := normTodo{content: strings.TrimSpace(content)}
	switch status {
	case state.TodoPending, state.TodoInProgress, state.TodoCompleted:
		t.status = status
	}
	return t
}

func normaliseTodoArg(v any) []normTodo {
	var out []normTodo
	switch list := v.(type) {
	case []any:
		for _, it := range list {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			c, _ := m["content"].(string)
			s, _ := m["status"].(string)
			out = append(out, normaliseTodo(c, s))
		}
	case []map[string]any:
		for _, m := range list {
			c, _ := m["content"].(string)
			s, _ := m["status"].(string)
			out = append(out, normaliseTodo(c, s))
		}
	case []state.Todo:
		for _, t := range list {
			out = append(out, normaliseTodo(t.Content, t.Status))
		}
	}
	return out
}

// BuildTodoActions is DeerFlow's _build_todo_actions (DeerFlow's attribution annotation).
func BuildTodoActions(prev, next []normTodo) []map[string]any {
	byContent := map[string][]int{}
	for i, p := range prev {
		if p.content != "" {
			byContent[p.content] = append(byContent[p.content], i)
		}
	}
	matched := make([]bool, len(prev))
	var actions []map[string]any
	for i, cur := range next {
		if cur.content == "" {
			continue
		}
		pi := -1
		for _, j := range byContent[cur.content] {
			if !matched[j] {
				pi = j
				break
			}
		}
		if pi < 0 {
			_, appeared := byContent[cur.content]
			if !appeared && i < len(prev) && !matched[i] {
				pi = i // positional rename fallback
			}
		}
		var p *normTodo
		if pi >= 0 {
			matched[pi] = true
			p = &prev[pi]
			if p.content == cur.content && p.status == cur.status {
				continue
			}
		}
		actions = append(actions, map[string]any{"kind": todoActionKind(p, cur), "content": cur.content})
	}
	for i, p := range prev {
		if p.content != "" && !matched[i] {
			actions = append(actions, map[string]any{"kind": "todo_remove", "content": p.content})
		}
	}
	return actions
}

func todoActionKind(prev *normTodo, cur normTodo) string {
	if prev != nil && prev.content != cur.content {
		return "todo_update"
	}
	switch cur.status {
	case state.TodoCompleted:
		return "todo_complete"
	case state.TodoInProgress:
		return "todo_start"
	}
	return "todo_update"
}
