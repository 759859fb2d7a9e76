package middleware

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Todo constants (DeerFlow's TodoMiddleware).
const (
	TodoSystemPrompt    = "## `write_todos`\n\nYou have access to the `write_todos` tool to plan and track multi-step tasks. Use it for complex work: write the plan first, mark each item in_progress when you start it and completed as soon as it is done. Do not call write_todos more than once in parallel. Skip it for simple requests."
	todoReminderName    = "todo_reminder"
	todoCompletionName  = "todo_completion_reminder"
	todoRunKey          = "middleware.todo"
	todoReminderIntro   = "Your todo list from earlier in this conversation is no longer visible in the context. Here it is:"
	todoCompletionIntro = "You are about to finish, but these todo items are not completed yet. Complete them, or update the list with write_todos if they are no longer needed:"
)

type todoRun struct {
	mu        sync.Mutex
	reminders int
	queued    []string
}

// TodoMiddleware is plan mode (is_plan_mode): it injects the write_todos instructions into
// every request, reminds the model of todos lost from the context (before_model), and
// sends a model that tries to finish with incomplete todos back to work with a transient
// reminder (after_model, jump to model; at most max_completion_reminders per run).
type TodoMiddleware struct {
	maxReminders int
}

// NewTodoMiddleware returns the middleware.
func NewTodoMiddleware(cfg PlanModeSettings) *TodoMiddleware {
	return &TodoMiddleware{maxReminders: cfg.MaxCompletionReminders}
}

// Name implements agent.Middleware.
func (*TodoMiddleware) Name() string { return NameTodo }

func (*TodoMiddleware) run(rt *agent.Runtime) *todoRun {
	return runScoped(rt, todoRunKey, func() *todoRun { return &todoRun{} })
}

// FormatTodos renders "- [status] content" lines (status default pending).
func FormatTodos(todos []state.Todo) string {
	var b strings.Builder
	for _, t := range todos {
		s := t.Status
		if s == "" {
			s = state.TodoPending
		}
		fmt.Fprintf(&b, "- [%s] %s\n", s, t.Content)
	}
	return strings.TrimRight(b.String(), "\n")
}

// BeforeAgent starts the run's reminder bookkeeping afresh.
func (m *TodoMiddleware) BeforeAgent(_ context.Context, rt *agent.Runtime, _ *state.State) (*state.Update, error) {
	r := m.run(rt)
	r.mu.Lock()
	r.reminders, r.queued = 0, nil
	r.mu.Unlock()
	return nil, nil
}

// AfterAgent drops the run's queued reminders.
func (m *TodoMiddleware) AfterAgent(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	return m.BeforeAgent(ctx, rt, st)
}

// BeforeModel adds a hidden todo_reminder when todos exist but no write_todos call is
// visible any more (e.g. after summarization) and no reminder was added yet.
func (*TodoMiddleware) BeforeModel(_ context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	if len(st.Todos) == 0 {
		return nil, nil
	}
	for _, msg := range st.Messages {
		if msg.IsAI() {
			for _, c := range msg.ToolCalls {
				if c.Name == "write_todos" {
					return nil, nil
				}
			}
		}
		if msg.IsHuman() && msg.Name == todoReminderName {
			return nil, nil
		}
	}
	content := "<system_reminder>\n" + todoReminderIntro + "\n" + FormatTodos(st.Todos) + "\n</system_reminder>"
	return &state.Update{Messages: []message.Message{hiddenHuman(message.NewID(), todoReminderName, content)}}, nil
}

// AfterModel sends a clean final answer with incomplete todos back to the model.
func (m *TodoMiddleware) AfterModel(_ context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	last, ok := lastAIIsLast(st.Messages)
	if !ok || hasToolIntent(last) || len(st.Todos) == 0 {
		return nil, nil
	}
	var open []state.Todo
	for _, t := range st.Todos {
		if t.Status != state.TodoCompleted {
			open = append(open, t)
		}
	}
	if len(open) == 0 {
		return nil, nil
	}
	r := m.run(rt)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reminders >= m.maxReminders {
		return nil, nil
	}
	r.reminders++
	r.queued = append(r.queued, todoCompletionIntro+"\n"+FormatTodos(open))
	return &state.Update{JumpTo: state.JumpModel}, nil
}

// WrapModelCall injects the write_todos instructions and any queued completion reminder.
func (m *TodoMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	r := req.Request.Clone()
	if len(r.Messages) > 0 && r.Messages[0].IsSystem() {
		sys := r.Messages[0]
		sys.Content = appendText(sys.Content, TodoSystemPrompt)
		r.Messages[0] = sys
	} else {
		r.Messages = append([]message.Message{{ID: "todo-system-prompt", Role: message.RoleSystem, Content: TodoSystemPrompt}}, r.Messages...)
	}
	run := m.run(req.Runtime)
	run.mu.Lock()
	queued := run.queued
	run.queued = nil
	run.mu.Unlock()
	if len(queued) > 0 {
		r.Messages = append(r.Messages, hiddenHuman(message.NewID(), todoCompletionName, strings.Join(queued, "\n\n")))
	}
	return next(ctx, req.WithRequest(r))
}
