package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/state"
)

// WriteTodos is DeerFlow's write_todos: it replaces the plan's todo list.
type WriteTodos struct{}

func (WriteTodos) Spec() Spec {
	return Spec{
		Name:        "write_todos",
		Description: "Create or update the todo list for the current task. Send the whole list every time.",
		Parameters: object([]string{"todos"}, map[string]any{
			"todos": map[string]any{"type": "array", "items": map[string]any{
				"type": "object", "required": []string{"content", "status"},
				"properties": map[string]any{
					"content": strProp("what to do"),
					"status":  map[string]any{"type": "string", "enum": []string{state.TodoPending, state.TodoInProgress, state.TodoCompleted}},
				},
			}},
		}),
	}
}

func (WriteTodos) Call(_ context.Context, call Call) (Result, error) {
	raw, _ := call.Args["todos"].([]any)
	todos := make([]state.Todo, 0, len(raw))
	for i, r := range raw {
		m, _ := r.(map[string]any)
		content := strings.TrimSpace(str(m, "content"))
		if content == "" {
			return Result{}, &ArgError{Tool: "write_todos", Field: fmt.Sprintf("todos[%d].content", i), Reason: "must not be empty"}
		}
		todos = append(todos, state.Todo{Content: content, Status: str(m, "status")})
	}
	b, _ := json.Marshal(todos)
	return Result{Content: "Updated todo list to " + string(b), Update: &state.Update{Todos: &todos}}, nil
}

// AskClarification is DeerFlow's ask_clarification: it puts a question to the user and
// ends the run (the ClarificationMiddleware, when installed, intercepts it first).
type AskClarification struct{}

func (AskClarification) Spec() Spec {
	return Spec{
		Name:        "ask_clarification",
		Description: "Ask the user a clarifying question when the request is ambiguous. The run stops until the user answers.",
		Parameters: object([]string{"question"}, map[string]any{
			"question":           strProp("the question"),
			"clarification_type": map[string]any{"type": "string", "enum": []string{"missing_info", "ambiguous_requirement", "approach_choice", "risk_confirmation", "suggestion"}},
			"context":            strProp("why you are asking"),
			"options":            map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		}),
	}
}

func (AskClarification) Call(_ context.Context, call Call) (Result, error) {
	var b strings.Builder
	if c := strings.TrimSpace(str(call.Args, "context")); c != "" {
		b.WriteString(c + "\n\n")
	}
	b.WriteString(strings.TrimSpace(str(call.Args, "question")))
	if opts, _ := call.Args["options"].([]any); len(opts) > 0 {
		for i, o := range opts {
			fmt.Fprintf(&b, "\n  %d. %v", i+1, o)
		}
	}
	return Result{Content: b.String(), Update: &state.Update{JumpTo: state.JumpEnd}}, nil
}
