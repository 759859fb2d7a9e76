package main

// Demo stand-ins for two DeerFlow middlewares, used by `agentmeter run` until the
// middleware package provides the real ones (it replaces leadMiddlewares). They exist so
// the offline demo shows a middleware model call (caller middleware:title, a child of the
// lead invoke_agent span) and agentmeter.step.kind on every lead chat span.

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// demoTitle follows TitleMiddleware's trigger (middleware.md §5.7): after_model, no
// title yet, exactly one human message and at least one AI message; it asks the lead
// model with caller middleware:title and falls back to the truncated prompt.
type demoTitle struct{}

func (*demoTitle) Name() string { return "title" }

func (*demoTitle) AfterModel(ctx context.Context, rt *agent.Runtime, st *state.State) (*state.Update, error) {
	if st.Title != "" {
		return nil, nil
	}
	var humans, ais int
	var user, assistant string
	for _, m := range st.Messages {
		switch m.Role {
		case message.RoleHuman:
			humans++
			user = m.Content
		case message.RoleAI:
			ais++
			if assistant == "" {
				assistant = m.Content
			}
		}
	}
	if humans != 1 || ais == 0 {
		return nil, nil
	}
	title := fallbackTitle(user)
	prompt := "Generate a concise title (max 6 words) for this conversation.\nUser: " + clipRunes(user, 500) + "\nAssistant: " + clipRunes(assistant, 500)
	no := false
	resp, err := rt.Model.Generate(ctx, &model.Request{
		Messages: []message.Message{message.Human(prompt)}, Caller: genai.MiddlewareCaller("title"), Stream: &no,
	})
	if err == nil {
		if t := strings.Trim(strings.TrimSpace(resp.Message.Content), `"'`); t != "" {
			title = clipRunes(t, 60)
		}
	}
	return &state.Update{Title: &title}, nil
}

func fallbackTitle(user string) string {
	user = strings.TrimSpace(user)
	if user == "" {
		return "New Conversation"
	}
	if len([]rune(user)) > 50 {
		return strings.TrimRight(clipRunes(user, 50), " ") + "..."
	}
	return user
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// demoStepKind sets agentmeter.step.kind on the chat span of each lead response with
// TokenUsageMiddleware's _infer_step_kind (observability.md §3.5), using a simplified todo
// diff (content match, no positional rename fallback).
type demoStepKind struct{}

func (*demoStepKind) Name() string { return "step-kind" }

func (*demoStepKind) AfterModel(ctx context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	i := message.LastAI(st.Messages)
	if i < 0 {
		return nil, nil
	}
	model.ResponseSpan(ctx).SetAttributes(attribute.String(genai.AttrStepKind, stepKind(st.Todos, st.Messages[i])))
	return nil, nil
}

func stepKind(prev []state.Todo, ai message.Message) string {
	type action struct{ kind string }
	var actions []action
	for _, tc := range ai.ToolCalls {
		switch tc.Name {
		case "write_todos":
			next := todosArg(tc.Args)
			n := todoDiff(prev, next)
			if n == 0 {
				actions = append(actions, action{"tool"})
			}
			for range n {
				actions = append(actions, action{"todo"})
			}
			prev = next
		case genai.TaskToolName:
			actions = append(actions, action{"subagent"})
		default:
			actions = append(actions, action{"tool"})
		}
	}
	switch {
	case len(actions) == 1 && actions[0].kind == "todo":
		return genai.StepTodoUpdate
	case len(actions) == 1 && actions[0].kind == "subagent":
		return genai.StepSubagentDispatch
	case len(actions) > 0:
		return genai.StepToolBatch
	case strings.TrimSpace(ai.Content) != "":
		return genai.StepFinalAnswer
	default:
		return genai.StepThinking
	}
}

func todosArg(args map[string]any) []state.Todo {
	raw, _ := args["todos"].([]any)
	var out []state.Todo
	for _, r := range raw {
		m, _ := r.(map[string]any)
		c, _ := m["content"].(string)
		s, _ := m["status"].(string)
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, state.Todo{Content: c, Status: s})
		}
	}
	return out
}

// todoDiff counts the actions of a todo list change: new or changed entries plus removed ones.
func todoDiff(prev, next []state.Todo) int {
	used := make([]bool, len(prev))
	n := 0
	for _, t := range next {
		matched := -1
		for i, p := range prev {
			if !used[i] && p.Content == t.Content {
				matched = i
				break
			}
		}
		if matched >= 0 {
			used[matched] = true
			if prev[matched].Status == t.Status {
				continue
			}
		}
		n++
	}
	for i := range prev {
		if !used[i] {
			n++
		}
	}
	return n
}
