package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/postgres"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// recordingModel keeps the messages of every lead-agent request.
type recordingModel struct {
	model.ChatModel
	mu   sync.Mutex
	reqs [][]message.Message
}

func (m *recordingModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, append([]message.Message(nil), req.Messages...))
	m.mu.Unlock()
	return m.ChatModel.Generate(ctx, req)
}

func (m *recordingModel) requests() [][]message.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]message.Message(nil), m.reqs...)
}

type threadEnv struct {
	*env
	model *recordingModel
	spans *tracetest.SpanRecorder
}

// newThreadEnv serves a lead agent (no tools) on the test script with a recording model,
// a span recorder and the given store ("" = a SQLite file).
func newThreadEnv(t *testing.T, cfg Config, st store.RunStore) *threadEnv {
	t.Helper()
	m, err := model.New(config.Model{Name: "main", Provider: "scripted", Model: "scripted-test", Script: filepath.Join("testdata", "script.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingModel{ChatModel: m}
	a, err := agent.New(agent.Config{Model: rec, Tools: tool.Builtins(tool.Bash{Timeout: time.Second}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		if st, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db")); err != nil {
			t.Fatal(err)
		}
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(telemetry.Placer()), sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	root := t.TempDir()
	if cfg.APIKeys == nil {
		cfg.APIKeys = testKeys()
	}
	srv, err := New(Options{
		Config: cfg, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		RunContext: telemetry.WithTracerProvider(context.Background(), tp),
		Agents: func(_ context.Context, threadID string) (Lead, error) {
			sb, err := sandbox.NewLocal(root, threadID)
			return Lead{Agent: a, Sandbox: sb, ModelName: "scripted-test"}, err
		},
		Uploads:       func(user, thread string) (string, error) { return filepath.Join(root, "uploads", user, thread), nil },
		FallbackTitle: func(user string) string { return "fallback: " + user },
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
		_ = st.Close()
	})
	return &threadEnv{env: &env{srv: srv, http: hs, store: &storeHandle{st}}, model: rec, spans: spans}
}

func humans(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.IsHuman() {
			out = append(out, m.Content)
		}
	}
	return out
}

func testThreadContinues(t *testing.T, e *threadEnv) {
	r1 := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"remember blue"}`, 200, ""))
	r2 := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"what did I say?"}`, 200, ""))
	for _, r := range []store.Run{r1, r2} {
		if r.Status != store.StatusSuccess {
			t.Fatalf("run = %+v", r)
		}
	}
	if r2.Usage.LastAIMessage != "answer 2" || r2.Usage.FirstHumanMessage != "what did I say?" || r2.Usage.TotalTokens != 23 {
		t.Fatalf("second run = %+v (its journal counts only its own call)", r2.Usage)
	}
	reqs := e.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	second := reqs[1]
	if got := humans(second); strings.Join(got, "|") != "remember blue|what did I say?" {
		t.Fatalf("second request's human messages = %q", got)
	}
	if len(second) != 3 || second[1].Content != "noted: blue" || second[1].UsageMetadata == nil || second[1].UsageMetadata.TotalTokens != 13 {
		t.Fatalf("second request = %+v, want the first run's exchange before the new message", second)
	}
	var st threadStateResponse
	if err := json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/t1/state", "alice-key", "", 200, "")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Values.Messages) != 4 || st.Values.Messages[3].Content != "answer 2" {
		t.Fatalf("thread state = %+v", st.Values.Messages)
	}
	e.expect(t, "GET", "/api/threads/nope/state", "alice-key", "", 404, detail("Thread nope not found"))
}

func TestThreadContinues(t *testing.T) { testThreadContinues(t, newThreadEnv(t, Config{}, nil)) }

func TestThreadContinuesOnPostgres(t *testing.T) {
	pg, err := postgres.Open(context.Background(), postgresServer(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	testThreadContinues(t, newThreadEnv(t, Config{}, pg))
}

func TestThreadHistoryOff(t *testing.T) {
	off := false
	e := newThreadEnv(t, Config{ThreadHistory: &off}, nil)
	e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"remember blue"}`, 200, "")
	r2 := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"remember again"}`, 200, ""))
	if r2.Usage.LastAIMessage != "noted: blue" {
		t.Fatalf("without history the second run = %+v, want a first turn", r2.Usage)
	}
	if reqs := e.model.requests(); len(reqs) != 2 || len(reqs[1]) != 1 {
		t.Fatalf("second request = %+v, want only its own message", reqs)
	}
}

func TestFiveRunsAtOnceOnOneThreadReject(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	codes := make(chan int, 5)
	bodies := make(chan string, 5)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := e.do(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember blue"}`)
			codes <- code
			bodies <- body
		}()
	}
	wg.Wait()
	close(codes)
	close(bodies)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[202] != 1 || n[409] != 4 {
		t.Fatalf("codes = %v, want one 202 and four 409", n)
	}
	for b := range bodies {
		if strings.Contains(b, "detail") && !strings.Contains(b, `Thread t1 already has a run in progress (run-`) {
			t.Fatalf("409 body = %s", b)
		}
	}
	// Once the run finished the thread takes the next one; a rejected run left no row.
	waitIdle(t, e.srv, "t1")
	runs, _ := e.store.ListRuns(context.Background(), "t1")
	if len(runs) != 1 || runs[0].Status != store.StatusSuccess {
		t.Fatalf("runs = %+v", runs)
	}
	e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"again"}`, 200, "")
	e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"x","multitask_strategy":"interrupt"}`, 400, detail(`multitask_strategy "interrupt" must be reject or enqueue`))
}

// waitIdle waits until the thread has no run pending or running in the store and none
// executing in s.
func waitIdle(t *testing.T, s *Server, threadID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		runs, err := s.store.ListRuns(context.Background(), threadID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			busy = busy || !r.Status.Final()
		}
		s.mu.Lock()
		for _, ar := range s.active {
			busy = busy || ar.threadID == threadID
		}
		s.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s still busy", threadID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFiveRunsEnqueuedRunWholeInOrder(t *testing.T) {
	for _, via := range []string{"config", "request", "postgres"} {
		t.Run(via, func(t *testing.T) {
			cfg, body := Config{MultitaskStrategy: MultitaskEnqueue}, `{"input":"%s"}`
			if via == "request" {
				cfg, body = Config{}, `{"input":"%s","multitask_strategy":"enqueue"}`
			}
			var st store.RunStore
			if via == "postgres" {
				pg, err := postgres.Open(context.Background(), postgresServer(t).NewDatabase(t))
				if err != nil {
					t.Fatal(err)
				}
				st = pg
			}
			e := newThreadEnv(t, cfg, st)
			var ids []string
			for i := range 5 {
				r := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", fmt.Sprintf(body, fmt.Sprintf("remember %d", i+1)), 202, ""))
				ids = append(ids, r.RunID)
			}
			// Queued runs are pending; the first is running.
			if r, _ := e.store.GetRun(context.Background(), ids[4]); r.Status != store.StatusPending {
				t.Fatalf("fifth run while queued = %s, want pending", r.Status)
			}
			waitIdle(t, e.srv, "t1")
			for i, id := range ids {
				r, err := e.store.GetRun(context.Background(), id)
				if err != nil || r.Status != store.StatusSuccess {
					t.Fatalf("run %d = %+v, %v", i+1, r, err)
				}
				want := "noted: blue"
				if i > 0 {
					want = fmt.Sprintf("answer %d", i+1)
				}
				if r.Usage.LastAIMessage != want || r.StopReason != "" || r.Usage.LLMCallCount != 1 {
					t.Errorf("run %d: answer %q stop %q calls %d, want %q (a whole run after the previous ones)", i+1, r.Usage.LastAIMessage, r.StopReason, r.Usage.LLMCallCount, want)
				}
			}
			reqs := e.model.requests()
			for k, req := range reqs {
				if got := len(humans(req)); got != k+1 {
					t.Errorf("request %d carries %d human messages, want %d", k+1, got, k+1)
				}
			}
		})
	}
}

func TestQueuedRunCancelled(t *testing.T) {
	e := newThreadEnv(t, Config{MultitaskStrategy: MultitaskEnqueue}, nil)
	first := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember 1"}`, 202, ""))
	queued := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember 2"}`, 202, ""))
	got := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs/"+queued.RunID+"/cancel", "alice-key", "", 202, ""))
	if got.Status != store.StatusInterrupted {
		t.Fatalf("cancelled queued run = %+v", got)
	}
	waitIdle(t, e.srv, "t1")
	if r, _ := e.store.GetRun(context.Background(), first.RunID); r.Status != store.StatusSuccess {
		t.Fatalf("first run = %+v", r)
	}
	if n := len(e.model.requests()); n != 1 {
		t.Fatalf("%d model calls, want 1 (the cancelled run never started)", n)
	}
}

func TestTraceparentIsTheRootsRemoteParent(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	req, _ := http.NewRequest("POST", e.http.URL+"/api/threads/t1/runs?wait=true", strings.NewReader(`{"input":"hello"}`))
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("tracestate", "vendor=abc")
	req.Header.Set("baggage", "tenant=acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var run store.Run
	_ = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if resp.StatusCode != 200 || run.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("run = %d %+v, want the caller's trace id", resp.StatusCode, run)
	}
	var root sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if strings.HasPrefix(s.Name(), "invoke_agent") {
			root = s
		}
	}
	if root == nil {
		t.Fatal("no invoke_agent span")
	}
	p := root.Parent()
	if !p.IsRemote() || p.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || p.SpanID().String() != "00f067aa0ba902b7" || p.TraceState().Get("vendor") != "abc" {
		t.Fatalf("root parent = %+v, want the remote caller span", p)
	}
	// Without the header the run starts its own trace.
	run = decodeRun(t, e.expect(t, "POST", "/api/threads/t2/runs?wait=true", "alice-key", `{"input":"hello"}`, 200, ""))
	if run.TraceID == "" || run.TraceID == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("run without traceparent has trace %q", run.TraceID)
	}
}

// A caller traced by a LangSmith SDK sends its run's placement (langsmith-trace) with
// the call: the run's spans are placed under the caller's run from their start, so the
// collector streams them to LangSmith inside the caller's trace. It is kept with the run
// (the executing gateway may be another replica). An invalid one is ignored: the run
// goes on as without it.
func TestLangSmithTraceHeaderPlacesTheRunUnderTheCaller(t *testing.T) {
	const caller = "20261202T120000000001Z2f6a1c7e-0b6e-4d8e-9a51-3c1f0e7d2b90.20261202T120001000002Z7d9e4c0a-5b1f-4e2a-8c3d-6f0a1b2c3d4e"
	e := newThreadEnv(t, Config{}, nil)
	post := func(thread, header string) store.Run {
		req, _ := http.NewRequest("POST", e.http.URL+"/api/threads/"+thread+"/runs?wait=true", strings.NewReader(`{"input":"hello"}`))
		req.Header.Set("Authorization", "Bearer alice-key")
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		req.Header.Set(telemetry.LangSmithTraceHeader, header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var run store.Run
		_ = json.NewDecoder(resp.Body).Decode(&run)
		if resp.StatusCode != 200 {
			t.Fatalf("run = %d %+v", resp.StatusCode, run)
		}
		stored, err := e.store.GetRun(context.Background(), run.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	placement := func(s sdktrace.ReadOnlySpan) string {
		for _, kv := range s.Attributes() {
			if kv.Key == genai.AttrLSDottedOrder {
				return kv.Value.AsString()
			}
		}
		return ""
	}

	run := post("t1", caller)
	if got := run.TraceCarrier[telemetry.LangSmithTraceHeader]; got != caller {
		t.Fatalf("stored carrier = %v, want the caller's placement", run.TraceCarrier)
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
		if s.Parent().IsRemote() {
			root = s
		}
	}
	if root == nil {
		t.Fatal("no span under the caller's")
	}
	if want := dottedorder.Child(caller, root.StartTime().UnixMicro(), root.SpanContext().SpanID()); placement(root) != want {
		t.Fatalf("root placement = %q, want %q", placement(root), want)
	}
	for _, s := range byID {
		if placement(s) == "" {
			t.Fatalf("%s has no placement", s.Name())
		}
		p, ok := byID[s.Parent().SpanID()]
		if !ok {
			continue
		}
		if want := dottedorder.Child(placement(p), s.StartTime().UnixMicro(), s.SpanContext().SpanID()); placement(s) != want {
			t.Fatalf("%s placement = %q, want %q", s.Name(), placement(s), want)
		}
	}

	n := len(e.spans.Ended())
	run = post("t2", "20261202T1200Z-not-a-placement")
	if _, kept := run.TraceCarrier[telemetry.LangSmithTraceHeader]; kept {
		t.Fatalf("an invalid placement was kept: %v", run.TraceCarrier)
	}
	for _, s := range e.spans.Ended()[n:] {
		if p := placement(s); p != "" {
			t.Fatalf("%s placed %q under an invalid caller placement", s.Name(), p)
		}
	}
}

func TestRunEventsServed(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"fail now"}`, 200, ""))
	var body runEventsResponse
	if err := json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/t1/runs/"+run.RunID+"/events", "alice-key", "", 200, "")), &body); err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, ev := range body.Events {
		if ev.Seq != int64(i+1) || ev.RunID != run.RunID || ev.ThreadID != "t1" {
			t.Fatalf("event %d = %+v", i, ev)
		}
		types = append(types, ev.EventType)
	}
	if got := strings.Join(types, ","); got != "run.start,llm.human.input,run.error" {
		t.Fatalf("event types = %s", got)
	}
	if !strings.Contains(string(body.Events[2].Content), "bad request from the provider") {
		t.Fatalf("run.error = %s", body.Events[2].Content)
	}
	e.expect(t, "GET", "/api/threads/t1/runs/"+run.RunID+"/events", "bob-key", "", 404, detail("Thread t1 not found"))
	e.expect(t, "GET", "/api/threads/t1/runs/run-nope/events", "alice-key", "", 404, detail("Run run-nope not found"))
	e.expect(t, "GET", "/api/threads/t1/runs/"+run.RunID+"/events", "writer-key", "", 403, detail("Permission denied: threads:read"))
}

// A first run interrupted before any title gets the fallback title (DeerFlow's worker);
// a later interrupted run never retitles the thread.
func TestInterruptedFirstRunIsTitled(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"slow one"}`, 202, ""))
	deadline := time.Now().Add(10 * time.Second)
	for len(e.model.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run never called the model")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 202, "")
	waitIdle(t, e.srv, "t1")
	var th threadResponse
	if err := json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/t1", "alice-key", "", 200, "")), &th); err != nil {
		t.Fatal(err)
	}
	if th.Title != "fallback: slow one" {
		t.Fatalf("title = %q", th.Title)
	}
	run = decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"second"}`, 202, ""))
	for len(e.model.requests()) < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	e.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 202, "")
	waitIdle(t, e.srv, "t1")
	_ = json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/t1", "alice-key", "", 200, "")), &th)
	if th.Title != "fallback: slow one" {
		t.Fatalf("title after a second interrupted run = %q", th.Title)
	}
}
