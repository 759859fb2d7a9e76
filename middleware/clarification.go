package middleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Clarification constants (DeerFlow's ClarificationMiddleware).
const (
	ClarificationToolName = "ask_clarification"
	// DisableClarificationKey in the run context turns clarification into a plain answer.
	DisableClarificationKey = "disable_clarification"
	// ClarificationDisabledMessage is the ToolMessage when clarification is disabled.
	ClarificationDisabledMessage = "Clarification is disabled for this run. Do not wait for the user: proceed with your best judgment and state the assumptions you made."
	maxFormFields                = 16
	maxFormOptions               = 24
	maxFormText                  = 200
	maxFormBytes                 = 16384
)

var clarificationIcons = map[string]string{
	"missing_info": "❓", "ambiguous_requirement": "🤔", "approach_choice": "🔀",
	"risk_confirmation": "⚠️", "suggestion": "💡",
}

var (
	xmlTag         = regexp.MustCompile(`<[^>]*>`)
	formFieldTypes = map[string]bool{"text": true, "textarea": true, "number": true, "email": true, "select": true, "multiselect": true, "boolean": true}
	reservedNames  = map[string]bool{"__proto__": true, "constructor": true, "prototype": true}
)

// ClarificationMiddleware is always last: the innermost tool wrapper. It short-circuits
// ask_clarification — every outer wrapper already ran its pre-checks — with a formatted
// question and a structured human_input payload, and ends the run (JumpTo end) so it
// waits for the user (DeerFlow's ClarificationMiddleware, which DeerFlow puts last).
type ClarificationMiddleware struct{}

// NewClarificationMiddleware returns the middleware.
func NewClarificationMiddleware() *ClarificationMiddleware { return &ClarificationMiddleware{} }

// Name implements agent.Middleware.
func (*ClarificationMiddleware) Name() string { return NameClarification }

// WrapToolCall implements agent.WrapToolCallHook.
func (*ClarificationMiddleware) WrapToolCall(ctx context.Context, req *agent.ToolRequest, next agent.ToolHandler) (*agent.ToolResponse, error) {
	if req.Call.Name != ClarificationToolName {
		return next(ctx, req)
	}
	if req.Runtime != nil && req.Runtime.Context != nil {
		if v, ok := req.Runtime.Context.Get(DisableClarificationKey); ok && truthy(v) {
			return &agent.ToolResponse{Message: message.Tool(req.Call.ID, req.Call.Name, ClarificationDisabledMessage, message.ToolSuccess)}, nil
		}
	}
	text, payload := BuildClarification(req.Call.ID, req.Call.Args)
	msg := message.Tool(req.Call.ID, req.Call.Name, text, message.ToolSuccess)
	msg.ID = payload["request_id"].(string)
	msg.AdditionalKwargs = map[string]any{"artifact": map[string]any{"human_input": payload}}
	return &agent.ToolResponse{Message: msg, Update: &state.Update{JumpTo: state.JumpEnd}}, nil
}

func truthy(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		switch strings.ToLower(b) {
		case "1", "true", "yes", "on":
			return true
		}
	}
	return false
}

// BuildClarification returns the readable text and the human_input payload of an
// ask_clarification call. The request id is clarification:<tool_call_id>, or a hash of
// the text when the call has no id, so retries replace the same message.
func BuildClarification(callID string, args map[string]any) (string, map[string]any) {
	question := strings.TrimSpace(fmt.Sprint(valueOr(args["question"], "")))
	ctype, _ := args["clarification_type"].(string)
	ctx, _ := args["context"].(string)
	ctx = strings.TrimSpace(ctx)
	options := NormaliseOptions(args["options"])
	fields, formOK := normaliseFields(args["fields"])

	var b strings.Builder
	if icon := clarificationIcons[ctype]; icon != "" {
		b.WriteString(icon + " ")
	}
	if ctx != "" {
		b.WriteString(ctx + "\n\n")
	}
	b.WriteString(question)
	payload := map[string]any{"kind": "human_input_request", "source": ClarificationToolName,
		"clarification_type": valueOr(ctype, "missing_info"), "question": question}
	if ctx != "" {
		payload["context"] = ctx
	}
	switch {
	case formOK:
		payload["version"], payload["input_mode"], payload["fields"] = 2, "form", fields
		for _, f := range fields {
			line := "\n- " + f["name"].(string)
			if req, _ := f["required"].(bool); req {
				line += " (required)"
			}
			if opts, ok := f["options"].([]string); ok && len(opts) > 0 {
				line += " — options: " + strings.Join(opts, " / ")
			}
			if f["type"] == "multiselect" {
				line += " (multiple allowed)"
			}
			b.WriteString(line)
		}
	case len(options) > 0:
		payload["version"], payload["input_mode"] = 1, "choice_with_other"
		opts := make([]map[string]any, len(options))
		for i, o := range options {
			fmt.Fprintf(&b, "\n\n  %d. %s", i+1, o)
			opts[i] = map[string]any{"id": "option-" + strconv.Itoa(i+1), "label": o}
		}
		payload["options"] = opts
	default:
		payload["version"], payload["input_mode"] = 1, "free_text"
	}
	text := b.String()
	id := strings.TrimSpace(callID)
	if id != "" {
		payload["tool_call_id"] = id
		payload["request_id"] = "clarification:" + id
	} else {
		sum := sha256.Sum256([]byte(text))
		payload["request_id"] = "clarification:" + hex.EncodeToString(sum[:8])
	}
	return text, payload
}

func valueOr(v any, def string) any {
	if v == nil {
		return def
	}
	if s, ok := v.(string); ok && s == "" {
		return def
	}
	return v
}

// pyString renders JSON scalars the way DeerFlow's Python does ("True", "None", "2").
func pyString(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// NormaliseOptions accepts lists, JSON strings, scalars and nested maps (flattened);
// options are trimmed, XML tags removed, blanks dropped, duplicates removed.
func NormaliseOptions(v any) []string {
	var flat []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case nil:
		case []any:
			for _, e := range t {
				if e == nil {
					flat = append(flat, pyString(nil)) // a null inside a list renders as "None"
					continue
				}
				walk(e)
			}
		case []string:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(t[k])
			}
		case string:
			s := strings.TrimSpace(t)
			if (strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") || s == "true" || s == "false" || s == "null") && x != nil {
				var decoded any
				if err := json.Unmarshal([]byte(s), &decoded); err == nil {
					if decoded == nil {
						return
					}
					walk(decoded)
					return
				}
			}
			if f, err := strconv.ParseFloat(s, 64); err == nil && s != "" && t == s && isJSONNumber(s) {
				flat = append(flat, pyString(f))
				return
			}
			flat = append(flat, s)
		default:
			flat = append(flat, pyString(t))
		}
	}
	walk(v)
	seen := map[string]bool{}
	var out []string
	for _, o := range flat {
		o = strings.TrimSpace(xmlTag.ReplaceAllString(o, ""))
		if o == "" || seen[o] {
			continue
		}
		seen[o] = true
		out = append(out, o)
	}
	return out
}

func isJSONNumber(s string) bool {
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// normaliseFields validates a v2 form atomically: any invalid entry degrades the whole
// form (ok=false). Unknown types and option-less selects degrade to text.
func normaliseFields(v any) ([]map[string]any, bool) {
	if s, ok := v.(string); ok {
		var decoded any
		if json.Unmarshal([]byte(s), &decoded) != nil {
			return nil, false
		}
		v = decoded
	}
	raw, ok := v.([]any)
	if !ok || len(raw) == 0 || len(raw) > maxFormFields {
		return nil, false
	}
	names := map[string]bool{}
	var out []map[string]any
	for _, r := range raw {
		f, ok := r.(map[string]any)
		if !ok {
			return nil, false
		}
		name, _ := f["name"].(string)
		name = strings.TrimSpace(name)
		if name == "" || len(name) > maxFormText || names[name] || reservedNames[name] {
			return nil, false
		}
		names[name] = true
		typ, _ := f["type"].(string)
		if !formFieldTypes[typ] {
			typ = "text"
		}
		field := map[string]any{"name": name, "type": typ}
		if label, ok := f["label"].(string); ok {
			if len(label) > maxFormText {
				return nil, false
			}
			field["label"] = strings.TrimSpace(label)
		}
		if ph, ok := f["placeholder"].(string); ok {
			field["placeholder"] = ph
		}
		switch req := f["required"].(type) {
		case bool:
			field["required"] = req
		case float64:
			field["required"] = req == 1
		}
		if typ == "select" || typ == "multiselect" {
			opts := NormaliseOptions(f["options"])
			if len(opts) > maxFormOptions {
				return nil, false
			}
			for _, o := range opts {
				if len(o) > maxFormText {
					return nil, false
				}
			}
			if len(opts) == 0 {
				field["type"] = "text"
			} else {
				field["options"] = opts
			}
		}
		out = append(out, field)
	}
	b, err := json.Marshal(out)
	if err != nil || len(b) > maxFormBytes {
		return nil, false
	}
	return out, true
}
