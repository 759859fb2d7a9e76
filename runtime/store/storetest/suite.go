// Package storetest is the one test suite every RunStore backend must pass. The expected
// aggregation results are written as JSON literals, so two backends passing the suite
// return byte-identical token-usage bodies for the same rows (DeerFlow's
// test_memory_and_sql_stores_agree and its pinned aggregation example).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// Opener returns a fresh, empty, migrated store; the suite closes it.
type Opener func(t *testing.T) store.RunStore

// Run runs the whole suite against the backend that open creates.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.RunStore)
	}{
		{"Threads", testThreads},
		{"RunRoundTrip", testRunRoundTrip},
		{"RunValidation", testRunValidation},
		{"ListRunsAndLatestModel", testListRuns},
		{"ProgressGuard", testProgressGuard},
		{"CompletionGuard", testCompletionGuard},
		{"InterruptRuns", testInterruptRuns},
		{"TextNotUTF8", testTextNotUTF8},
		{"AggregatePinnedExample", testAggregatePinned},
		{"AggregateIncludeActive", testAggregateIncludeActive},
		{"AggregateEmptyThread", testAggregateEmpty},
		{"AggregateByModelInvariantAndLegacy", testAggregateByModel},
		{"AggregateIncludeActiveProgressSnapshot", testAggregateProgressSnapshot},
		{"AggregateSkipsOtherKindsAndStatuses", testAggregateSkips},
		{"ConcurrentCompletions", testConcurrent},
		{"ThreadState", testThreadState},
		{"Memory", testMemory},
		{"RunEvents", testRunEvents},
		{"Cost", testCost},
		{"AdmitRejectAndEnqueue", testAdmitRejectAndEnqueue},
		{"ClaimOrder", testClaimOrder},
		{"NotReadyRunHoldsItsPlace", testNotReadyRunHoldsItsPlace},
		{"Leases", testLeases},
		{"RequestCancel", testRequestCancel},
		{"QueueProperty", testQueueProperty},
		{"QueueConcurrentReplicas", testQueueConcurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			c.fn(t, s)
		})
	}
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// usage builds CompletionData from totals and callers; byModel may be nil (legacy row).
func usage(total, in, out, lead, sub, mw int64, byModel map[string]journal.ModelUsage) journal.CompletionData {
	return journal.CompletionData{TotalTokens: total, TotalInputTokens: in, TotalOutputTokens: out,
		LeadAgentTokens: lead, SubagentTokens: sub, MiddlewareTokens: mw, TokenUsageByModel: byModel}
}

// seed creates a run in thread with the given final status and usage (through the normal
// pending → running → completion path, or a progress snapshot for running).
func seed(t *testing.T, s store.RunStore, thread, runID string, status store.Status, u journal.CompletionData, model string) {
	t.Helper()
	must(t, s.CreateRun(ctx, store.Run{RunID: runID, ThreadID: thread, ModelName: model}))
	if status == store.StatusPending {
		return
	}
	ok, err := s.MarkRunning(ctx, runID)
	must(t, err)
	if !ok {
		t.Fatalf("MarkRunning(%s) changed no row", runID)
	}
	if status == store.StatusRunning {
		ok, err = s.UpdateRunProgress(ctx, runID, u)
	} else {
		ok, err = s.UpdateRunCompletion(ctx, runID, store.Completion{Status: status, Usage: u})
	}
	must(t, err)
	if !ok {
		t.Fatalf("seeding %s as %s changed no row", runID, status)
	}
}

func aggregateJSON(t *testing.T, s store.RunStore, thread string, includeActive bool) string {
	t.Helper()
	u, err := s.AggregateTokensByThread(ctx, thread, includeActive)
	must(t, err)
	b, err := json.Marshal(u)
	must(t, err)
	return string(b)
}

func wantJSON(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func testThreads(t *testing.T, s store.RunStore) {
	created := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	must(t, s.CreateThread(ctx, store.Thread{ID: "thread-1", UserID: "alice", CreatedAt: created}))
	must(t, s.CreateThread(ctx, store.Thread{ID: "shared-1"}))
	got, err := s.GetThread(ctx, "thread-1")
	must(t, err)
	if got.ID != "thread-1" || got.UserID != "alice" || !got.CreatedAt.Equal(created) {
		t.Fatalf("GetThread = %+v", got)
	}
	shared, err := s.GetThread(ctx, "shared-1")
	must(t, err)
	if shared.UserID != "" {
		t.Fatalf("shared thread user = %q, want empty", shared.UserID)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread-1", UserID: "bob"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate thread: err = %v, want ErrExists", err)
	}
	if _, err := s.GetThread(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: err = %v, want ErrNotFound", err)
	}
	if err := s.CreateThread(ctx, store.Thread{}); err == nil {
		t.Fatal("thread without id accepted")
	}
}

func testRunRoundTrip(t *testing.T, s store.RunStore) {
	created := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	must(t, s.CreateRun(ctx, store.Run{RunID: "run-1", ThreadID: "t", UserID: "alice", ModelName: "lead-model", CreatedAt: created}))
	r, err := s.GetRun(ctx, "run-1")
	must(t, err)
	if r.Status != store.StatusPending || r.OperationKind != store.OperationRun || r.UserID != "alice" || r.ModelName != "lead-model" || !r.CreatedAt.Equal(created) || r.FinishedAt != nil {
		t.Fatalf("new run = %+v", r)
	}
	if r.Usage.TokenUsageByModel == nil || len(r.Usage.TokenUsageByModel) != 0 {
		t.Fatalf("new run by-model = %#v, want empty map", r.Usage.TokenUsageByModel)
	}
	if err := s.CreateRun(ctx, store.Run{RunID: "run-1", ThreadID: "t"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate run: err = %v, want ErrExists", err)
	}
	if _, err := s.GetRun(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing run: err = %v, want ErrNotFound", err)
	}
	ok, err := s.MarkRunning(ctx, "run-1")
	must(t, err)
	if !ok {
		t.Fatal("MarkRunning(pending) changed no row")
	}
	ok, err = s.MarkRunning(ctx, "run-1")
	must(t, err)
	if ok {
		t.Fatal("MarkRunning(running) changed a row")
	}
	must(t, s.SetTraceID(ctx, "run-1", "0af7651916cd43dd8448eb211c80319c"))
	long := strings.Repeat("é", journal.MaxLastAIMessage+10)
	full := journal.CompletionData{
		TotalInputTokens: 1200, TotalOutputTokens: 300, TotalTokens: 1500, LLMCallCount: 4,
		LeadAgentTokens: 1000, SubagentTokens: 400, MiddlewareTokens: 100,
		TokenUsageByModel: map[string]journal.ModelUsage{
			"lead-model": {InputTokens: 800, OutputTokens: 300, TotalTokens: 1100, CacheReadTokens: 512},
			"sub-model":  {InputTokens: 400, OutputTokens: 0, TotalTokens: 400},
		},
		MessageCount: 7, FirstHumanMessage: "compare Paris and Tokyo", LastAIMessage: long,
	}
	ok, err = s.UpdateRunCompletion(ctx, "run-1", store.Completion{Status: store.StatusSuccess, Usage: full, StopReason: "loop_capped"})
	must(t, err)
	if !ok {
		t.Fatal("completion of a running run changed no row")
	}
	r, err = s.GetRun(ctx, "run-1")
	must(t, err)
	want := full
	want.LastAIMessage = strings.Repeat("é", journal.MaxLastAIMessage)
	gotJSON, _ := json.Marshal(r.Usage)
	wantB, _ := json.Marshal(want)
	wantJSON(t, "stored usage", string(gotJSON), string(wantB))
	if r.Status != store.StatusSuccess || r.StopReason != "loop_capped" || r.FinishedAt == nil {
		t.Fatalf("completed run = %+v", r)
	}
	if r.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("trace id = %q: a completion without trace id must keep the recorded one", r.TraceID)
	}
}

func testRunValidation(t *testing.T, s store.RunStore) {
	for _, c := range []struct {
		run  store.Run
		want string
	}{
		{store.Run{ThreadID: "t"}, "run_id is required"},
		{store.Run{RunID: "r"}, "thread_id is required"},
		{store.Run{RunID: "r", ThreadID: "t", Status: "done"}, `status "done" is not a run status`},
		{store.Run{RunID: "r", ThreadID: "t", ModelName: strings.Repeat("m", 129)}, "model_name is 129 characters; the limit is 128"},
	} {
		err := s.CreateRun(ctx, c.run)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CreateRun(%+v) error = %v, want %q", c.run, err, c.want)
		}
	}
	if _, err := s.UpdateRunCompletion(ctx, "r", store.Completion{Status: "bogus"}); err == nil {
		t.Error("completion with an invalid status accepted")
	}
}

func testListRuns(t *testing.T, s store.RunStore) {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	m, err := s.LatestRunModel(ctx, "t")
	must(t, err)
	if m != "" {
		t.Fatalf("latest model of an empty thread = %q", m)
	}
	for i, model := range []string{"m-a", "m-b", "m-c"} {
		must(t, s.CreateRun(ctx, store.Run{RunID: fmt.Sprintf("run-%d", 3-i), ThreadID: "t", ModelName: model, CreatedAt: base.Add(time.Duration(i) * time.Second)}))
	}
	must(t, s.CreateRun(ctx, store.Run{RunID: "other", ThreadID: "t2", CreatedAt: base.Add(time.Hour)}))
	runs, err := s.ListRuns(ctx, "t")
	must(t, err)
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.RunID)
	}
	if strings.Join(ids, ",") != "run-3,run-2,run-1" {
		t.Fatalf("ListRuns order = %v, want oldest first", ids)
	}
	m, err = s.LatestRunModel(ctx, "t")
	must(t, err)
	if m != "m-c" {
		t.Fatalf("LatestRunModel = %q, want m-c", m)
	}
}

func testProgressGuard(t *testing.T, s store.RunStore) {
	u := usage(70, 50, 20, 70, 0, 0, map[string]journal.ModelUsage{"lead-model": {InputTokens: 50, OutputTokens: 20, TotalTokens: 70}})
	must(t, s.CreateRun(ctx, store.Run{RunID: "r", ThreadID: "t"}))
	if ok, err := s.UpdateRunProgress(ctx, "r", u); err != nil || ok {
		t.Fatalf("progress on a pending run: changed=%v err=%v, want no change", ok, err)
	}
	_, err := s.MarkRunning(ctx, "r")
	must(t, err)
	if ok, err := s.UpdateRunProgress(ctx, "r", u); err != nil || !ok {
		t.Fatalf("progress on a running run: changed=%v err=%v", ok, err)
	}
	r, _ := s.GetRun(ctx, "r")
	if r.Usage.TotalTokens != 70 || r.Usage.TokenUsageByModel["lead-model"].TotalTokens != 70 {
		t.Fatalf("progress not stored: %+v", r.Usage)
	}
	_, err = s.UpdateRunCompletion(ctx, "r", store.Completion{Status: store.StatusSuccess, Usage: usage(90, 60, 30, 90, 0, 0, nil)})
	must(t, err)
	// A late trailing snapshot must not overwrite the final counters.
	if ok, err := s.UpdateRunProgress(ctx, "r", u); err != nil || ok {
		t.Fatalf("progress after completion: changed=%v err=%v, want no change", ok, err)
	}
	r, _ = s.GetRun(ctx, "r")
	if r.Usage.TotalTokens != 90 {
		t.Fatalf("final total overwritten: %d", r.Usage.TotalTokens)
	}
}

func testCompletionGuard(t *testing.T, s store.RunStore) {
	for i, c := range []struct {
		from, to store.Status
		changed  bool
	}{
		{store.StatusPending, store.StatusSuccess, true},
		{store.StatusRunning, store.StatusSuccess, true},
		{store.StatusRunning, store.StatusError, true},
		{store.StatusRunning, store.StatusInterrupted, true},
		{store.StatusSuccess, store.StatusSuccess, true}, // the target itself
		{store.StatusSuccess, store.StatusError, false},
		{store.StatusError, store.StatusSuccess, false},
		{store.StatusInterrupted, store.StatusError, true}, // the one extra transition
		{store.StatusInterrupted, store.StatusSuccess, false},
		{store.StatusTimeout, store.StatusError, false},
		{store.StatusTimeout, store.StatusSuccess, false},
	} {
		id := fmt.Sprintf("guard-%d", i)
		must(t, s.CreateRun(ctx, store.Run{RunID: id, ThreadID: "t", Status: c.from}))
		ok, err := s.UpdateRunCompletion(ctx, id, store.Completion{Status: c.to, Usage: usage(5, 3, 2, 5, 0, 0, nil), Error: "boom"})
		must(t, err)
		if ok != c.changed {
			t.Errorf("%s → %s: changed = %v, want %v", c.from, c.to, ok, c.changed)
		}
		r, err := s.GetRun(ctx, id)
		must(t, err)
		want := c.from
		if c.changed {
			want = c.to
		}
		if r.Status != want {
			t.Errorf("%s → %s: status = %s, want %s", c.from, c.to, r.Status, want)
		}
	}
	if ok, err := s.UpdateRunCompletion(ctx, "missing", store.Completion{Status: store.StatusSuccess}); err != nil || ok {
		t.Errorf("completion of a missing run: changed=%v err=%v", ok, err)
	}
}

func testInterruptRuns(t *testing.T, s store.RunStore) {
	seed(t, s, "t", "p", store.StatusPending, journal.CompletionData{}, "")
	seed(t, s, "t", "r", store.StatusRunning, usage(10, 5, 5, 10, 0, 0, nil), "")
	seed(t, s, "t", "done", store.StatusSuccess, usage(10, 5, 5, 10, 0, 0, nil), "")
	n, err := s.InterruptRuns(ctx, []string{"p", "r", "done", "missing"}, "gateway shut down")
	must(t, err)
	if n != 2 {
		t.Fatalf("InterruptRuns changed %d rows, want 2", n)
	}
	for id, want := range map[string]store.Status{"p": store.StatusInterrupted, "r": store.StatusInterrupted, "done": store.StatusSuccess} {
		r, err := s.GetRun(ctx, id)
		must(t, err)
		if r.Status != want {
			t.Errorf("%s: status %s, want %s", id, r.Status, want)
		}
		if want == store.StatusInterrupted && (r.Error != "gateway shut down" || r.FinishedAt == nil) {
			t.Errorf("%s: interrupted row = %+v", id, r)
		}
	}
	r, _ := s.GetRun(ctx, "r")
	if r.Usage.TotalTokens != 10 {
		t.Errorf("interrupting lost the progress counters: %d", r.Usage.TotalTokens)
	}
	if n, err := s.InterruptRuns(ctx, nil, "x"); err != nil || n != 0 {
		t.Errorf("InterruptRuns(nil) = %d, %v", n, err)
	}
}

// PinnedExampleJSON is DeerFlow's pinned aggregation (DeerFlow's token-usage response body).
const PinnedExampleJSON = `{"total_tokens":150,"total_input_tokens":90,"total_output_tokens":60,"total_runs":2,"by_model":{"unknown":{"tokens":150,"runs":2}},"by_caller":{"lead_agent":120,"subagent":25,"middleware":5}}`

// SeedPinnedExample writes the rows of the pinned example into thread (and one run of
// other-thread): success(100; 70/30; 80/15/5), error(50; 20/30; 40/10/0), running(999),
// other thread success(888). Legacy rows (no per-model JSON, no model name).
func SeedPinnedExample(t *testing.T, s store.RunStore, thread string) {
	seed(t, s, thread, thread+"-ok", store.StatusSuccess, usage(100, 70, 30, 80, 15, 5, nil), "")
	seed(t, s, thread, thread+"-err", store.StatusError, usage(50, 20, 30, 40, 10, 0, nil), "")
	seed(t, s, thread, thread+"-running", store.StatusRunning, usage(999, 999, 0, 999, 0, 0, nil), "")
	seed(t, s, thread+"-other", thread+"-other-ok", store.StatusSuccess, usage(888, 888, 0, 888, 0, 0, nil), "")
}

func testAggregatePinned(t *testing.T, s store.RunStore) {
	SeedPinnedExample(t, s, "thread-1")
	wantJSON(t, "pinned example", aggregateJSON(t, s, "thread-1", false), PinnedExampleJSON)
}

func testAggregateIncludeActive(t *testing.T, s store.RunStore) {
	seed(t, s, "t", "ok", store.StatusSuccess, usage(100, 70, 30, 100, 0, 0, nil), "")
	seed(t, s, "t", "running", store.StatusRunning, usage(25, 20, 5, 20, 5, 0, nil), "")
	wantJSON(t, "default view", aggregateJSON(t, s, "t", false),
		`{"total_tokens":100,"total_input_tokens":70,"total_output_tokens":30,"total_runs":1,"by_model":{"unknown":{"tokens":100,"runs":1}},"by_caller":{"lead_agent":100,"subagent":0,"middleware":0}}`)
	wantJSON(t, "include_active", aggregateJSON(t, s, "t", true),
		`{"total_tokens":125,"total_input_tokens":90,"total_output_tokens":35,"total_runs":2,"by_model":{"unknown":{"tokens":125,"runs":2}},"by_caller":{"lead_agent":120,"subagent":5,"middleware":0}}`)
}

// EmptyJSON is the aggregate of a thread without rows.
const EmptyJSON = `{"total_tokens":0,"total_input_tokens":0,"total_output_tokens":0,"total_runs":0,"by_model":{},"by_caller":{"lead_agent":0,"subagent":0,"middleware":0}}`

func testAggregateEmpty(t *testing.T, s store.RunStore) {
	wantJSON(t, "empty thread", aggregateJSON(t, s, "nothing-here", false), EmptyJSON)
	wantJSON(t, "empty thread, include_active", aggregateJSON(t, s, "nothing-here", true), EmptyJSON)
}

// ByModelJSON is the store invariant case of DeerFlow's test_token_usage_by_model.py.
const ByModelJSON = `{"total_tokens":422,"total_input_tokens":0,"total_output_tokens":0,"total_runs":3,"by_model":{"lead-model":{"tokens":100,"runs":1},"lead-model-b":{"tokens":80,"runs":1},"legacy-model":{"tokens":42,"runs":1},"middleware-model":{"tokens":50,"runs":1},"subagent-model":{"tokens":150,"runs":1}},"by_caller":{"lead_agent":222,"subagent":150,"middleware":50}}`

// SeedByModel writes that case's three completed runs: 300 tokens over three models with
// per-model JSON, 80 on lead-model-b, and a legacy row of 42 with empty JSON.
func SeedByModel(t *testing.T, s store.RunStore, thread string) {
	seed(t, s, thread, thread+"-multi", store.StatusSuccess, usage(300, 0, 0, 100, 150, 50, map[string]journal.ModelUsage{
		"lead-model":       {TotalTokens: 100},
		"subagent-model":   {TotalTokens: 150},
		"middleware-model": {TotalTokens: 50},
	}), "lead-model")
	seed(t, s, thread, thread+"-b", store.StatusSuccess, usage(80, 0, 0, 80, 0, 0, map[string]journal.ModelUsage{
		"lead-model-b": {TotalTokens: 80},
	}), "lead-model-b")
	seed(t, s, thread, thread+"-legacy", store.StatusSuccess, usage(42, 0, 0, 42, 0, 0, nil), "legacy-model")
}

func testAggregateByModel(t *testing.T, s store.RunStore) {
	SeedByModel(t, s, "t")
	got := aggregateJSON(t, s, "t", false)
	wantJSON(t, "by-model invariant", got, ByModelJSON)
	var u store.TokenUsage
	must(t, json.Unmarshal([]byte(got), &u))
	var sum int64
	for _, b := range u.ByModel {
		sum += b.Tokens
	}
	if sum != u.TotalTokens {
		t.Fatalf("by_model sums to %d, total_tokens %d", sum, u.TotalTokens)
	}
}

func testAggregateProgressSnapshot(t *testing.T, s store.RunStore) {
	seed(t, s, "t", "running", store.StatusRunning, usage(70, 50, 20, 70, 0, 0, map[string]journal.ModelUsage{
		"lead-model": {InputTokens: 50, OutputTokens: 20, TotalTokens: 70},
	}), "lead-model")
	wantJSON(t, "default view", aggregateJSON(t, s, "t", false), EmptyJSON)
	wantJSON(t, "include_active", aggregateJSON(t, s, "t", true),
		`{"total_tokens":70,"total_input_tokens":50,"total_output_tokens":20,"total_runs":1,"by_model":{"lead-model":{"tokens":70,"runs":1}},"by_caller":{"lead_agent":70,"subagent":0,"middleware":0}}`)
}

func testAggregateSkips(t *testing.T, s store.RunStore) {
	seed(t, s, "t", "ok", store.StatusSuccess, usage(10, 6, 4, 10, 0, 0, nil), "m")
	seed(t, s, "t", "pending", store.StatusPending, journal.CompletionData{}, "m")
	seed(t, s, "t", "timeout", store.StatusTimeout, usage(1000, 0, 0, 1000, 0, 0, nil), "m")
	seed(t, s, "t", "interrupted", store.StatusInterrupted, usage(2000, 0, 0, 2000, 0, 0, nil), "m")
	must(t, s.CreateRun(ctx, store.Run{RunID: "ckpt", ThreadID: "t", OperationKind: "checkpoint_write", Status: store.StatusRunning}))
	_, err := s.UpdateRunCompletion(ctx, "ckpt", store.Completion{Status: store.StatusSuccess, Usage: usage(3000, 0, 0, 3000, 0, 0, nil)})
	must(t, err)
	want := `{"total_tokens":10,"total_input_tokens":6,"total_output_tokens":4,"total_runs":1,"by_model":{"m":{"tokens":10,"runs":1}},"by_caller":{"lead_agent":10,"subagent":0,"middleware":0}}`
	wantJSON(t, "default view", aggregateJSON(t, s, "t", false), want)
	wantJSON(t, "include_active", aggregateJSON(t, s, "t", true), want)
}

func testConcurrent(t *testing.T, s store.RunStore) {
	const threads, perThread = 5, 20
	var wg sync.WaitGroup
	errs := make(chan error, threads*perThread)
	for th := range threads {
		for i := range perThread {
			wg.Add(1)
			go func() {
				defer wg.Done()
				thread, id := fmt.Sprintf("t%d", th), fmt.Sprintf("t%d-r%d", th, i)
				if err := s.CreateRun(ctx, store.Run{RunID: id, ThreadID: thread, ModelName: "m"}); err != nil {
					errs <- err
					return
				}
				if _, err := s.MarkRunning(ctx, id); err != nil {
					errs <- err
					return
				}
				n := int64(i + 1)
				u := usage(n, n, 0, n, 0, 0, map[string]journal.ModelUsage{"m": {InputTokens: n, TotalTokens: n}})
				if _, err := s.UpdateRunProgress(ctx, id, u); err != nil {
					errs <- err
					return
				}
				if ok, err := s.UpdateRunCompletion(ctx, id, store.Completion{Status: store.StatusSuccess, Usage: u}); err != nil || !ok {
					errs <- fmt.Errorf("complete %s: changed=%v err=%v", id, ok, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for th := range threads {
		u, err := s.AggregateTokensByThread(ctx, fmt.Sprintf("t%d", th), false)
		must(t, err)
		if want := int64(perThread * (perThread + 1) / 2); u.TotalTokens != want || u.TotalRuns != perThread || u.ByModel["m"].Tokens != want {
			t.Errorf("thread t%d: %+v, want %d tokens over %d runs", th, u, want, perThread)
		}
	}
}
