package subagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// MaxBrief bounds subagent_result_brief and subagent_error (DeerFlow's terminal ToolMessage contract).
const MaxBrief = 2000

// TaskTool is the task tool: it dispatches a subagent through an Executor.
type TaskTool struct {
	Executor *Executor
}

func (t *TaskTool) Spec() tool.Spec {
	types := make([]any, 0, len(t.Executor.order))
	var desc strings.Builder
	desc.WriteString("Delegate a task to a subagent that works on it independently and returns a result. Available subagent types:")
	for _, n := range t.Executor.order {
		types = append(types, n)
		fmt.Fprintf(&desc, "\n- %s: %s", n, t.Executor.types[n].Description)
	}
	return tool.Spec{
		Name:        genai.TaskToolName,
		Description: desc.String(),
		Parameters: map[string]any{
			"type": "object", "additionalProperties": false,
			"required": []string{"description", "prompt", "subagent_type"},
			"properties": map[string]any{
				"description":   map[string]any{"type": "string", "description": "a short (3-5 word) description of the task"},
				"prompt":        map[string]any{"type": "string", "description": "the task for the subagent, with all the context it needs"},
				"subagent_type": map[string]any{"type": "string", "enum": types},
				"max_turns":     map[string]any{"type": "integer", "minimum": 1.0},
			},
		},
	}
}

// Call dispatches and waits. Usage is reported to call.Env.Usage exactly once, whatever
// the outcome; a cancelled parent gets the cancelled ToolMessage and ctx's error.
func (t *TaskTool) Call(ctx context.Context, call tool.Call) (tool.Result, error) {
	args := call.Args
	task := Task{
		ToolCallID: call.ID, Description: strArg(args, "description"), Prompt: strArg(args, "prompt"),
		Type: strArg(args, "subagent_type"),
	}
	if strings.TrimSpace(task.Prompt) == "" {
		return tool.Result{}, &tool.ArgError{Tool: genai.TaskToolName, Field: "prompt", Reason: "must not be empty"}
	}
	if f, ok := args["max_turns"].(float64); ok {
		task.MaxTurns = int(f)
	}
	env := call.Env
	if env == nil {
		env = &tool.Env{}
	}
	task.ThreadID, task.RunID, task.UserID, task.Sandbox = env.ThreadID, env.RunID, env.UserID, env.Sandbox
	var index atomic.Int64
	task.OnModelCall = func(resp *model.Response, records []journal.UsageRecord) {
		// One event per captured AI message: message_index is 1-based and
		// total_messages the messages captured so far (DeerFlow's task polling loop).
		n := index.Add(1)
		env.EmitEvent("task_running", map[string]any{
			"task_id": call.ID, "message": resp.Message, "message_index": n, "total_messages": n,
			"usage": usagePayload(records), "model_name": resp.Model,
		})
	}
	// task_started names the model the subagent runs on (its type's, else the default).
	env.EmitEvent("task_started", map[string]any{"task_id": call.ID, "description": task.Description, "model_name": t.Executor.ModelName(task.Type)})

	out := t.Executor.Execute(ctx, task)

	// Report to the parent journal exactly once; no recorder (a subagent) or no
	// records means nothing to report.
	if env.Usage != nil && len(out.Records) > 0 {
		env.Usage.RecordExternalLLMUsageRecords(out.Records)
	}
	payload := map[string]any{"task_id": call.ID, "usage": usagePayload(out.Records), "model_name": out.ModelName}
	switch out.Status {
	case StatusCompleted:
		payload["result"] = out.Result
		env.EmitEvent("task_completed", payload)
	case StatusPollingTimeout:
		env.EmitEvent("task_timed_out", payload)
	default:
		payload["error"] = out.Error
		env.EmitEvent("task_"+out.Status, payload)
	}
	content, kwargs := TerminalMessage(out)
	res := tool.Result{Content: content, AdditionalKwargs: kwargs,
		Attributes: map[string]string{genai.AttrSubagentStatus: out.Status}}
	if out.Status != StatusCompleted {
		res.Status = message.ToolError
		res.Attributes[genai.AttrErrorType] = out.Status
	}
	// On parent cancellation the cancelled message is returned normally; the agent loop
	// sees ctx cancelled after the batch and aborts the run.
	return res, nil
}

func strArg(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return strings.TrimSpace(s)
}

func usagePayload(records []journal.UsageRecord) any {
	in, out, total, ok := journal.Sum(records)
	if !ok {
		return nil
	}
	return map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": total}
}

var capLabels = map[string]string{"token_capped": "token budget", "turn_capped": "turn budget", "loop_capped": "repeated tool-call loop"}

// TerminalMessage formats the task ToolMessage content and additional_kwargs of an
// outcome (DeerFlow's terminal ToolMessage contract).
func TerminalMessage(o Outcome) (string, map[string]any) {
	label := capLabels[o.StopReason]
	detail := strings.TrimSpace(o.Error)
	var content string
	switch o.Status {
	case StatusCompleted:
		if label != "" {
			content = fmt.Sprintf("Task Succeeded (capped: %s). Result: %s", label, o.Result)
		} else {
			content = "Task Succeeded. Result: " + o.Result
		}
	case StatusCancelled:
		content = withDetail("Task cancelled by user.", detail)
	case StatusTimedOut:
		content = withDetail("Task timed out.", detail)
	case StatusPollingTimeout:
		content = detail
	default:
		head := "Task failed."
		if label != "" {
			head = fmt.Sprintf("Task failed (capped: %s).", label)
		}
		content = withDetail(head, detail)
	}
	kw := map[string]any{message.KwargSubagentStatus: o.Status}
	if o.Status == StatusCompleted && strings.TrimSpace(o.Result) != "" {
		sum := sha256.Sum256([]byte(o.Result))
		kw["subagent_result_brief"] = Brief(o.Result, MaxBrief)
		kw["subagent_result_sha256"] = hex.EncodeToString(sum[:])
	}
	if o.Status != StatusCompleted && detail != "" {
		kw["subagent_error"] = Brief(detail, MaxBrief)
	}
	if label != "" {
		kw["subagent_stop_reason"] = o.StopReason
	}
	if name := strings.TrimSpace(o.ModelName); name != "" {
		kw["subagent_model_name"] = name
	}
	if in, out, total, ok := journal.Sum(o.Records); ok {
		kw[message.KwargSubagentTokenUsage] = map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": total}
	}
	return content, kw
}

func withDetail(head, detail string) string {
	if detail == "" {
		return head
	}
	return head + " Error: " + detail
}

// Brief bounds s to n characters: the head two thirds, "\n...\n", and the tail.
func Brief(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	const sep = "\n...\n"
	budget := n - len(sep)
	head := budget * 2 / 3
	tail := budget - head
	return string(r[:head]) + sep + string(r[len(r)-tail:])
}
