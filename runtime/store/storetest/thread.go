package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// threadState is a state with every channel filled, as a run leaves it.
func threadState() state.State {
	ai := message.AI("", message.ToolCall{ID: "call_1", Name: "task", Args: map[string]any{"description": "d", "prompt": "p"}})
	ai.ID = "ai-1"
	ai.UsageMetadata = &message.UsageMetadata{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
	ai.ResponseMetadata = map[string]any{"model_name": "m", "finish_reason": "tool_calls"}
	tm := message.Tool("call_1", "task", "Task Succeeded. Result: ok", message.ToolSuccess)
	tm.ID = "tool-1"
	tm.AdditionalKwargs = map[string]any{"subagent_status": "completed", "subagent_token_usage": map[string]any{"input_tokens": 3.0, "output_tokens": 2.0, "total_tokens": 5.0}}
	human := message.Message{ID: "h-1", Role: message.RoleHuman, Content: "hello \u0000 <b>", Name: "user-input",
		AdditionalKwargs: map[string]any{"run_id": "run-1"}}
	return state.State{
		Messages:   []message.Message{human, ai, tm, {ID: "ai-2", Role: message.RoleAI, Content: "done"}},
		Todos:      []state.Todo{{Content: "a", Status: state.TodoCompleted}, {Content: "b", Status: state.TodoPending}},
		Title:      "Greeting",
		Sandbox:    &state.Sandbox{SandboxID: "local:t"},
		ThreadData: &state.ThreadData{WorkspacePath: "/w", UploadsPath: "/u", OutputsPath: "/o"},
		Artifacts:  []string{"/mnt/user-data/outputs/x.md"},
		Extra: map[string]any{
			"summary_text": "earlier: hello",
			"delegations":  []any{map[string]any{"id": "call_1", "status": "completed", "run_id": "run-1"}},
		},
	}
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

func testThreadState(t *testing.T, s store.RunStore) {
	empty, v0, err := s.LoadThreadState(ctx, "none")
	must(t, err)
	if len(empty.Messages) != 0 || empty.Title != "" || empty.Extra != nil || v0 != 0 {
		t.Fatalf("state of an unknown thread = %+v version %d, want zero", empty, v0)
	}
	must(t, s.CreateThread(ctx, store.Thread{ID: "t", UserID: "alice"}))
	want := threadState()
	v1, err := s.SaveThreadState(ctx, "t", want, 0)
	must(t, err)
	got, loaded, err := s.LoadThreadState(ctx, "t")
	must(t, err)
	if v1 != 1 || loaded != 1 {
		t.Fatalf("first save: version %d, loaded %d; want 1", v1, loaded)
	}
	wantJSON(t, "state round trip", canonical(t, got), canonical(t, want))
	th, err := s.GetThread(ctx, "t")
	must(t, err)
	if th.Title != "Greeting" || th.UserID != "alice" {
		t.Fatalf("GetThread after the state = %+v, want title Greeting", th)
	}
	// A second save replaces everything (the next run's state).
	next := want
	next.Messages = append(append([]message.Message(nil), want.Messages...), message.Message{ID: "h-2", Role: message.RoleHuman, Content: "again"})
	next.Todos = []state.Todo{}
	next.Extra = map[string]any{"summary_text": "newer"}
	v2, err := s.SaveThreadState(ctx, "t", next, loaded)
	must(t, err)
	got, loaded, err = s.LoadThreadState(ctx, "t")
	must(t, err)
	if v2 != 2 || loaded != 2 {
		t.Fatalf("second save: version %d, loaded %d; want 2", v2, loaded)
	}
	if len(got.Messages) != 5 || got.Messages[4].Content != "again" || len(got.Todos) != 0 || got.Extra["summary_text"] != "newer" || got.Extra["delegations"] != nil {
		t.Fatalf("state after the second save = %s", canonical(t, got))
	}
	// A save from a state loaded before the last save is refused, changing nothing: no
	// lost update.
	for _, stale := range []int64{0, 1, 3} {
		_, err := s.SaveThreadState(ctx, "t", want, stale)
		if !errors.Is(err, store.ErrStateConflict) {
			t.Fatalf("save with stale version %d = %v, want ErrStateConflict", stale, err)
		}
	}
	if got, v, _ := s.LoadThreadState(ctx, "t"); v != 2 || len(got.Messages) != 5 {
		t.Fatalf("after refused saves: version %d, %d messages; want 2 and 5", v, len(got.Messages))
	}
	// A thread row is not needed (legacy threads), and a state without a title clears it.
	_, err = s.SaveThreadState(ctx, "untracked", state.State{}, 0)
	must(t, err)
	got, _, err = s.LoadThreadState(ctx, "untracked")
	must(t, err)
	if len(got.Messages) != 0 || got.Title != "" {
		t.Fatalf("empty state round trip = %s", canonical(t, got))
	}
	if _, err := s.SaveThreadState(ctx, "", want, 0); err == nil {
		t.Fatal("SaveThreadState without a thread id succeeded")
	}
}

func testMemory(t *testing.T, s store.RunStore) {
	m, err := s.LoadMemory(ctx, "alice", "lead_agent")
	must(t, err)
	if m != "" {
		t.Fatalf("memory before any save = %q", m)
	}
	must(t, s.SaveMemory(ctx, "alice", "lead_agent", "likes Paris"))
	must(t, s.SaveMemory(ctx, "bob", "lead_agent", "likes Tokyo"))
	must(t, s.SaveMemory(ctx, "alice", "lead_agent", "likes Paris and Tokyo"))
	for user, want := range map[string]string{"alice": "likes Paris and Tokyo", "bob": "likes Tokyo"} {
		got, err := s.LoadMemory(ctx, user, "lead_agent")
		must(t, err)
		if got != want {
			t.Errorf("memory of %s = %q, want %q", user, got, want)
		}
	}
	if got, _ := s.LoadMemory(ctx, "alice", "other"); got != "" {
		t.Errorf("memory of another agent = %q", got)
	}
	if err := s.SaveMemory(ctx, "", "lead_agent", "x"); err == nil {
		t.Error("SaveMemory without a user succeeded")
	}
}

func testRunEvents(t *testing.T, s store.RunStore) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC)
	first := []journal.Event{
		{Type: "run.start", Category: "lifecycle", Metadata: map[string]any{"caller": "lead_agent"}, Time: at},
		{Type: "middleware:safety_termination", Category: "middleware", Content: map[string]any{"name": "SafetyFinishReasonMiddleware", "hook": "after_model"}, Time: at.Add(time.Millisecond)},
	}
	must(t, s.AppendRunEvents(ctx, "run-1", "t", first))
	many := make([]journal.Event, 0, 1200)
	for i := range 1200 { // more than one INSERT batch
		many = append(many, journal.Event{Type: "llm.ai.response", Category: "message", Content: map[string]any{"i": i}, Time: at.Add(time.Second)})
	}
	must(t, s.AppendRunEvents(ctx, "run-1", "t", many))
	must(t, s.AppendRunEvents(ctx, "run-2", "t", first[:1]))
	must(t, s.AppendRunEvents(ctx, "run-2", "t", nil))
	got, err := s.ListRunEvents(ctx, "run-1")
	must(t, err)
	if len(got) != 1202 {
		t.Fatalf("run-1 has %d events, want 1202", len(got))
	}
	for i, e := range got {
		if e.Seq != int64(i+1) || e.RunID != "run-1" || e.ThreadID != "t" {
			t.Fatalf("event %d = %+v", i, e)
		}
	}
	wantJSON(t, "first event", canonical(t, got[0]), `{"seq":1,"run_id":"run-1","thread_id":"t","event_type":"run.start","category":"lifecycle","metadata":{"caller":"lead_agent"},"created_at":"2026-12-01T09:00:00.123456Z"}`)
	wantJSON(t, "second event", canonical(t, got[1]), `{"seq":2,"run_id":"run-1","thread_id":"t","event_type":"middleware:safety_termination","category":"middleware","content":{"hook":"after_model","name":"SafetyFinishReasonMiddleware"},"created_at":"2026-12-01T09:00:00.124456Z"}`)
	if string(got[1201].Content) != `{"i":1199}` {
		t.Fatalf("last event content = %s", got[1201].Content)
	}
	other, err := s.ListRunEvents(ctx, "run-2")
	must(t, err)
	if len(other) != 1 || other[0].Seq != 1 {
		t.Fatalf("run-2 events = %+v", other)
	}
	none, err := s.ListRunEvents(ctx, "nope")
	must(t, err)
	if none == nil || len(none) != 0 {
		t.Fatalf("events of an unknown run = %#v, want empty", none)
	}
}

// SeedThreadState saves the suite's full thread state (every channel filled) under thread.
func SeedThreadState(t *testing.T, s store.RunStore, thread string) {
	t.Helper()
	_, err := s.SaveThreadState(ctx, thread, threadState(), 0)
	must(t, err)
}
