package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
)

// Placeholder contents of synthetic ToolMessages (DeerFlow's DanglingToolCallMiddleware).
const (
	DanglingInterrupted = "[Tool call was interrupted and did not return a result.]"
	DanglingMissingName = "[Tool call could not be executed because its name was missing or empty. Use one of the available tool names when retrying.]"
	DanglingInvalidArgs = "[Tool call could not be executed because its arguments were invalid.]"
	danglingInvalidFmt  = "[Tool call could not be executed because its arguments were invalid: %s]"
	// DanglingWriteFileGuidance is the guidance for an invalid write_file call.
	DanglingWriteFileGuidance = "[Tool call to write_file could not be executed because its arguments were not valid JSON. No file was written. Do not retry the same large payload: provide the file content as plain text in your answer, or split it into several smaller write_file calls.]"
	// UnknownToolName replaces blank tool names in the serialised request.
	UnknownToolName = "unknown_tool"
	// Raw provider views in additional_kwargs.
	kwargRawToolCalls     = "tool_calls"
	kwargInvalidToolCalls = "invalid_tool_calls"
)

// DanglingToolCallMiddleware patches the model request so every tool call has exactly one
// answer right after its AI message (wrap_model_call only; never state): ids normalised,
// results regrouped after their call, orphans dropped, missing answers replaced by
// synthetic error ToolMessages (DeerFlow's DanglingToolCallMiddleware). It works in wrap_model_call because a
// before_model state update would append the placeholders at the end, where the provider
// would see them in the wrong position.
type DanglingToolCallMiddleware struct{}

// NewDanglingToolCallMiddleware returns the middleware.
func NewDanglingToolCallMiddleware() *DanglingToolCallMiddleware {
	return &DanglingToolCallMiddleware{}
}

// Name implements agent.Middleware.
func (*DanglingToolCallMiddleware) Name() string { return NameDanglingToolCall }

// WrapModelCall implements agent.WrapModelCallHook.
func (*DanglingToolCallMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	patched, ok := BuildPatchedMessages(req.Request.Messages)
	if !ok {
		return next(ctx, req)
	}
	r := req.Request.Clone()
	r.Messages = patched
	return next(ctx, req.WithRequest(r))
}

// pendingCall is one tool call of an AI message in the view the serialiser reads.
type pendingCall struct {
	id, name, source, errText string
}

// BuildPatchedMessages is DeerFlow's _build_patched_messages: it returns the patched list
// and true, or (nil, false) when the history needs no change.
func BuildPatchedMessages(msgs []message.Message) ([]message.Message, bool) {
	if len(msgs) == 0 || wellFormed(msgs) {
		return nil, false
	}
	changed := false
	work := make([]message.Message, len(msgs))
	copy(work, msgs)
	calls := make(map[int][]pendingCall) // by AI message index

	// Pass 1: id normalisation and per-turn claiming of blank-id results.
	for i := 0; i < len(work); i++ {
		m := work[i]
		if !m.IsAI() {
			continue
		}
		cs, relabelled, sanitized := normaliseAICalls(&work[i], i)
		changed = changed || relabelled || sanitized
		calls[i] = cs
		var open []pendingCall
		for _, c := range cs {
			if strings.HasPrefix(c.id, "deerflow_synthetic_tool_call_") {
				open = append(open, c)
			}
		}
		if len(open) == 0 {
			continue
		}
		// The turn's results: ToolMessages up to the next AI message.
		end := i + 1
		for end < len(work) && !work[end].IsAI() {
			end++
		}
		blank := 0
		for j := i + 1; j < end; j++ {
			if work[j].IsTool() && strings.TrimSpace(work[j].ToolCallID) == "" {
				blank++
			}
		}
		fullyAnswered := blank == len(open)
		claimed := map[string]bool{}
		for j := i + 1; j < end; j++ {
			tm := work[j]
			if !tm.IsTool() || strings.TrimSpace(tm.ToolCallID) != "" {
				continue
			}
			var cands []pendingCall
			for _, c := range open {
				if claimed[c.id] {
					continue
				}
				if tm.Name == "" || c.name == "" || tm.Name == c.name {
					cands = append(cands, c)
				}
			}
			if len(cands) == 1 || (len(cands) > 1 && fullyAnswered) {
				tm = tm.Clone()
				tm.ToolCallID = cands[0].id
				work[j] = tm
				claimed[cands[0].id] = true
				changed = true
			}
		}
	}

	// Pass 2: index results FIFO per id; then rebuild. Results whose id no call has are
	// orphans: never emitted.
	queue := map[string][]int{}
	for j, m := range work {
		if m.IsTool() {
			queue[m.ToolCallID] = append(queue[m.ToolCallID], j)
		}
	}
	used := make([]bool, len(work))
	out := make([]message.Message, 0, len(work)+4)
	for i, m := range work {
		if m.IsTool() {
			continue // re-emitted after its AI message, or dropped as an orphan
		}
		out = append(out, m)
		if !m.IsAI() {
			continue
		}
		for pos, c := range calls[i] {
			q := queue[c.id]
			found := -1
			for len(q) > 0 {
				j := q[0]
				q = q[1:]
				if !used[j] {
					found = j
					break
				}
			}
			queue[c.id] = q
			if found >= 0 {
				used[found] = true
				out = append(out, work[found])
				continue
			}
			out = append(out, syntheticResult(i, pos, c))
			changed = true
		}
	}
	for j, m := range work {
		if m.IsTool() && !used[j] {
			changed = true // orphan dropped
		}
	}
	if !changed && sameOrder(out, msgs) {
		return nil, false
	}
	return out, true
}

// wellFormed is the allocation-free fast path for the common case: every AI message's
// structured calls have non-blank ids and names, there are no invalid or raw-only calls,
// each AI message is followed immediately by its ToolMessages in call order, and no
// ToolMessage stands anywhere else.
func wellFormed(msgs []message.Message) bool {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.IsTool() {
			return false // not directly after its AI message
		}
		if !m.IsAI() {
			continue
		}
		if _, ok := m.AdditionalKwargs[kwargInvalidToolCalls]; ok {
			return false
		}
		if len(m.ToolCalls) == 0 {
			if _, ok := m.AdditionalKwargs[kwargRawToolCalls]; ok {
				return false
			}
			continue
		}
		n := len(m.ToolCalls)
		if i+n >= len(msgs) {
			return false // unanswered calls at the end
		}
		for k, c := range m.ToolCalls {
			if strings.TrimSpace(c.ID) == "" || strings.TrimSpace(c.Name) == "" {
				return false
			}
			for _, d := range m.ToolCalls[:k] {
				if d.ID == c.ID {
					return false // duplicate ids in one message: let the full pass pair them
				}
			}
		}
		for k, c := range m.ToolCalls {
			// In call order, as the full pass would re-emit them.
			if t := msgs[i+1+k]; !t.IsTool() || t.ToolCallID != c.ID {
				return false
			}
		}
		i += n
	}
	return true
}

func sameOrder(a, b []message.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Role != b[i].Role {
			return false
		}
	}
	return true
}

func syntheticResult(msgIdx, pos int, c pendingCall) message.Message {
	content := DanglingInterrupted
	switch {
	case strings.TrimSpace(c.name) == "" || c.name == UnknownToolName:
		content = DanglingMissingName
	case c.source == "invalid" && c.name == "write_file":
		content = DanglingWriteFileGuidance
		if c.errText != "" {
			content += " Parser error: " + clipRunes(c.errText, 500)
		}
	case c.source == "invalid" && c.errText != "":
		content = fmt.Sprintf(danglingInvalidFmt, clipRunes(c.errText, 500))
	case c.source == "invalid":
		content = DanglingInvalidArgs
	}
	name := c.name
	if strings.TrimSpace(name) == "" {
		name = UnknownToolName
	}
	tm := message.Tool(c.id, name, content, message.ToolError)
	tm.ID = fmt.Sprintf("dangling-tool-result:%d:%d:%s", msgIdx, pos, c.id)
	return tm
}

// normaliseAICalls relabels blank ids and sanitises names and arguments of the views the
// provider serialiser reads, editing *m in place on a clone. It returns the calls.
func normaliseAICalls(m *message.Message, idx int) (cs []pendingCall, relabelled, sanitized bool) {
	var c message.Message
	cloned := false
	clone := func() {
		if !cloned {
			c = m.Clone()
			cloned = true
		}
	}
	for pos, tc := range m.ToolCalls {
		id, name := tc.ID, tc.Name
		if strings.TrimSpace(id) == "" {
			clone()
			id = fmt.Sprintf("deerflow_synthetic_tool_call_%d_call_%d", idx, pos)
			c.ToolCalls[pos].ID = id
			relabelled = true
		}
		if strings.TrimSpace(name) == "" {
			clone()
			c.ToolCalls[pos].Name = UnknownToolName
			sanitized = true
			name = ""
		}
		cs = append(cs, pendingCall{id: id, name: name, source: "call"})
	}
	invalid, _ := m.AdditionalKwargs[kwargInvalidToolCalls].([]any)
	for pos, raw := range invalid {
		ic, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		id, _ := ic["id"].(string)
		name, _ := ic["name"].(string)
		errText, _ := ic["error"].(string)
		args, isStr := ic["args"].(string)
		norm := normaliseJSONObject(args)
		needs := strings.TrimSpace(id) == "" || strings.TrimSpace(name) == "" || !isStr || norm != args
		if needs {
			clone()
			nic := map[string]any{}
			for k, v := range ic {
				nic[k] = v
			}
			if strings.TrimSpace(id) == "" {
				id = fmt.Sprintf("deerflow_synthetic_tool_call_%d_invalid_%d", idx, pos)
				nic["id"] = id
				relabelled = true
			}
			if strings.TrimSpace(name) == "" {
				nic["name"] = UnknownToolName
				name = ""
			}
			nic["args"] = norm
			list := append([]any(nil), c.AdditionalKwargs[kwargInvalidToolCalls].([]any)...)
			list[pos] = nic
			c.AdditionalKwargs[kwargInvalidToolCalls] = list
			sanitized = true
		}
		cs = append(cs, pendingCall{id: id, name: name, source: "invalid", errText: errText})
	}
	if len(m.ToolCalls) == 0 && len(invalid) == 0 {
		rawCalls, _ := m.AdditionalKwargs[kwargRawToolCalls].([]any)
		for pos, raw := range rawCalls {
			rc, ok := raw.(map[string]any)
			if !ok {
				continue
			}
			id, _ := rc["id"].(string)
			fn, _ := rc["function"].(map[string]any)
			name, _ := fn["name"].(string)
			args, isStr := fn["arguments"].(string)
			norm := normaliseJSONObject(args)
			if strings.TrimSpace(id) == "" || strings.TrimSpace(name) == "" || !isStr || norm != args {
				clone()
				nrc := map[string]any{}
				for k, v := range rc {
					nrc[k] = v
				}
				nfn := map[string]any{}
				for k, v := range fn {
					nfn[k] = v
				}
				if strings.TrimSpace(id) == "" {
					id = fmt.Sprintf("deerflow_synthetic_tool_call_%d_raw_%d", idx, pos)
					nrc["id"] = id
					relabelled = true
				}
				if strings.TrimSpace(name) == "" {
					nfn["name"] = UnknownToolName
					name = ""
				}
				nfn["arguments"] = norm
				nrc["function"] = nfn
				list := append([]any(nil), c.AdditionalKwargs[kwargRawToolCalls].([]any)...)
				list[pos] = nrc
				c.AdditionalKwargs[kwargRawToolCalls] = list
				sanitized = true
			}
			cs = append(cs, pendingCall{id: id, name: name, source: "raw"})
		}
	}
	if cloned {
		*m = c
	}
	return cs, relabelled, sanitized
}

// normaliseJSONObject returns s when it is a JSON object, else "{}".
func normaliseJSONObject(s string) string {
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
		return "{}"
	}
	return s
}
