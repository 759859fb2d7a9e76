package gateway

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/model"
	_ "github.com/agentmeter/agentmeter/runtime/model/scripted" // provider "scripted"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/store/storetest"
	"github.com/agentmeter/agentmeter/runtime/subagent"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func digest(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

// testKeys: alice and bob may read and write, reader only reads, writer only writes.
func testKeys() []APIKey {
	rw := []string{ScopeThreadsRead, ScopeThreadsWrite}
	return []APIKey{
		{KeySHA256: digest("alice-key"), UserID: "alice", Scopes: rw},
		{KeySHA256: digest("bob-key"), UserID: "bob", Scopes: rw},
		{KeySHA256: digest("reader-key"), UserID: "alice", Scopes: []string{ScopeThreadsRead}},
		{KeySHA256: digest("writer-key"), UserID: "alice", Scopes: []string{ScopeThreadsWrite}},
	}
}

type env struct {
	srv   *Server
	http  *httptest.Server
	store *storeHandle
}

type storeHandle struct{ store.RunStore }

// newLeadFactory builds a lead agent on the test script with the task tool, the way
// cmd/agentmeter does (scripted model, subagent executor).
func newLeadFactory(t *testing.T) AgentFactory {
	t.Helper()
	cfg := config.Model{Name: "main", Provider: "scripted", Model: "scripted-test", Script: filepath.Join("testdata", "script.yaml"), ContextWindow: 1000}
	m, err := model.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := tool.Builtins(tool.Bash{Timeout: time.Second}, nil)
	exec, err := subagent.NewExecutor(subagent.Options{Model: m, Tools: base})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Model: m, Tools: append(append([]tool.Tool(nil), base...), &subagent.TaskTool{Executor: exec})})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	return func(_ context.Context, threadID string) (Lead, error) {
		sb, err := sandbox.NewLocal(root, threadID)
		if err != nil {
			return Lead{}, err
		}
		return Lead{Agent: a, Sandbox: sb, ModelName: "scripted-test"}, nil
	}
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv, err := New(Options{
		Config: cfg, Store: st, Agents: newLeadFactory(t),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		RunContext:    telemetry.WithTracerProvider(context.Background(), tp),
		ContextWindow: func(m string) int { return map[string]int{"scripted-test": 1000}[m] },
		DefaultModel:  "scripted-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
		_ = st.Close()
	})
	return &env{srv: srv, http: hs, store: &storeHandle{st}}
}

func authEnv(t *testing.T) *env {
	return newEnv(t, Config{APIKeys: testKeys(), ProgressInterval: time.Millisecond})
}

// do sends a request and returns the status and body.
func (e *env) do(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) expect(t *testing.T, method, path, key, body string, wantCode int, wantBody string) string {
	t.Helper()
	code, got := e.do(t, method, path, key, body)
	if code != wantCode {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, got, wantCode)
	}
	if wantBody != "" && strings.TrimSpace(got) != wantBody {
		t.Fatalf("%s %s body:\n got %s\nwant %s", method, path, strings.TrimSpace(got), wantBody)
	}
	return got
}

func detail(s string) string { return fmt.Sprintf(`{"detail":%q}`, s) }

func TestTokenUsagePinnedExample(t *testing.T) {
	e := authEnv(t)
	storetest.SeedPinnedExample(t, e.store, "thread-1")
	// No thread row: an untracked legacy thread passes the permissive owner check.
	want := `{"thread_id":"thread-1",` + strings.TrimPrefix(storetest.PinnedExampleJSON, "{")
	want = strings.TrimSuffix(want, "}") + `,"context_usage":null}`
	e.expect(t, "GET", "/api/threads/thread-1/token-usage", "alice-key", "", 200, want)
}

func TestTokenUsageIncludeActive(t *testing.T) {
	e := authEnv(t)
	storetest.SeedPinnedExample(t, e.store, "thread-1")
	e.expect(t, "GET", "/api/threads/thread-1/token-usage?include_active=true", "alice-key", "", 200,
		`{"thread_id":"thread-1","total_tokens":1149,"total_input_tokens":1089,"total_output_tokens":60,"total_runs":3,"by_model":{"unknown":{"tokens":1149,"runs":3}},"by_caller":{"lead_agent":1119,"subagent":25,"middleware":5},"context_usage":null}`)
	e.expect(t, "GET", "/api/threads/thread-1/token-usage?include_active=false", "alice-key", "", 200, "")
	e.expect(t, "GET", "/api/threads/thread-1/token-usage?include_active=maybe", "alice-key", "", 400,
		detail(`include_active must be true or false, got "maybe"`))
}

func TestTokenUsageLegacyRowsAndEmptyThread(t *testing.T) {
	e := authEnv(t)
	storetest.SeedByModel(t, e.store, "mixed")
	want := `{"thread_id":"mixed",` + strings.TrimSuffix(strings.TrimPrefix(storetest.ByModelJSON, "{"), "}") + `,"context_usage":null}`
	e.expect(t, "GET", "/api/threads/mixed/token-usage", "alice-key", "", 200, want)
	want = `{"thread_id":"empty",` + strings.TrimSuffix(strings.TrimPrefix(storetest.EmptyJSON, "{"), "}") + `,"context_usage":null}`
	e.expect(t, "GET", "/api/threads/empty/token-usage", "alice-key", "", 200, want)
}

func TestAuth401403(t *testing.T) {
	e := authEnv(t)
	for _, key := range []string{"", "wrong-key"} {
		e.expect(t, "GET", "/api/threads/t1/token-usage", key, "", 401, detail("Authentication required"))
		e.expect(t, "POST", "/api/threads", key, "", 401, detail("Authentication required"))
	}
	// A non-Bearer scheme is not authentication.
	req, _ := http.NewRequest("GET", e.http.URL+"/api/threads/t1/token-usage", nil)
	req.Header.Set("Authorization", "Basic YWxpY2Uta2V5")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("Basic auth: %d %v", resp.StatusCode, resp.Header)
	}
	e.expect(t, "GET", "/api/threads/t1/token-usage", "writer-key", "", 403, detail("Permission denied: threads:read"))
	e.expect(t, "POST", "/api/threads", "reader-key", "", 403, detail("Permission denied: threads:write"))
	e.expect(t, "POST", "/api/threads/t1/runs", "reader-key", `{"input":"hi"}`, 403, detail("Permission denied: threads:write"))
	// Authentication is checked before the id: an anonymous caller learns nothing.
	e.expect(t, "GET", "/api/threads/bad%20id/token-usage", "", "", 401, detail("Authentication required"))
}

func TestCrossUserIsolationIs404(t *testing.T) {
	e := authEnv(t)
	e.expect(t, "POST", "/api/threads", "alice-key", `{"thread_id":"alice-thread"}`, 201, "")
	body := e.expect(t, "POST", "/api/threads/alice-thread/runs?wait=true", "alice-key", `{"input":"hello"}`, 200, "")
	var run store.Run
	if err := json.Unmarshal([]byte(body), &run); err != nil {
		t.Fatal(err)
	}
	notFound := detail("Thread alice-thread not found")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/threads/alice-thread", ""},
		{"GET", "/api/threads/alice-thread/token-usage", ""},
		{"GET", "/api/threads/alice-thread/token-usage?include_active=true", ""},
		{"GET", "/api/threads/alice-thread/runs/" + run.RunID, ""},
		{"GET", "/api/threads/alice-thread/runs/" + run.RunID + "/stream", ""},
		{"POST", "/api/threads/alice-thread/runs/" + run.RunID + "/cancel", ""},
		{"GET", "/api/threads/alice-thread/runs/" + run.RunID + "/events", ""},
		{"GET", "/api/threads/alice-thread/state", ""},
		{"POST", "/api/threads/alice-thread/runs", `{"input":"hi"}`},
	} {
		e.expect(t, c.method, c.path, "bob-key", c.body, 404, notFound)
	}
	// Alice still sees her data; a thread id that was never created is 404 for GET.
	e.expect(t, "GET", "/api/threads/alice-thread", "alice-key", "", 200, "")
	e.expect(t, "GET", "/api/threads/nobody", "bob-key", "", 404, detail("Thread nobody not found"))
	// A run of another thread is not reachable through this thread.
	e.expect(t, "POST", "/api/threads", "bob-key", `{"thread_id":"bob-thread"}`, 201, "")
	e.expect(t, "GET", "/api/threads/bob-thread/runs/"+run.RunID, "bob-key", "", 404, detail("Run "+run.RunID+" not found"))
	// A shared thread (no owner) is readable by everyone.
	if err := e.store.CreateThread(context.Background(), store.Thread{ID: "shared"}); err != nil {
		t.Fatal(err)
	}
	e.expect(t, "GET", "/api/threads/shared/token-usage", "bob-key", "", 200, "")
	e.expect(t, "GET", "/api/threads/shared", "alice-key", "", 200, "")
}

func TestMalformedIDsAndBodies(t *testing.T) {
	e := newEnv(t, Config{APIKeys: testKeys(), MaxBodyBytes: 256, MaxPromptChars: 20})
	badThread := detail("invalid thread_id: ids are 1-128 characters of letters, digits, '.', '_', ':' and '-', starting with a letter or digit")
	for _, p := range []string{"bad%20id", "-leading-dash", "%2e%2e", strings.Repeat("x", 129), "semi%3Bcolon", "caf%C3%A9"} {
		e.expect(t, "GET", "/api/threads/"+p+"/token-usage", "alice-key", "", 400, badThread)
	}
	e.expect(t, "GET", "/api/threads/ok/runs/bad%20run", "alice-key", "", 400,
		detail("invalid run_id: ids are 1-128 characters of letters, digits, '.', '_', ':' and '-', starting with a letter or digit"))
	e.expect(t, "POST", "/api/threads", "alice-key", `{"thread_id":"has space"}`, 400, badThread)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"input":`, 400, detail("invalid request body: unexpected EOF")},
		{`not json`, 400, detail("invalid request body: invalid character 'o' in literal null (expecting 'u')")},
		{`{"input":"hi","prompt":"x"}`, 400, detail(`invalid request body: json: unknown field "prompt"`)},
		{`{"input":42}`, 400, detail("invalid request body: json: cannot unmarshal number into Go struct field createRunRequest.input of type string")},
		{`{"input":"hi"} {"input":"again"}`, 400, detail("invalid request body: more than one JSON value")},
		{``, 400, detail("request body is empty; expected a JSON object")},
		{`{}`, 400, detail("input is required: a non-empty string")},
		{`{"input":"   "}`, 400, detail("input is required: a non-empty string")},
		{`{"input":"` + strings.Repeat("é", 21) + `"}`, 413, detail("input is 21 characters; the limit is 20 (gateway.max_prompt_chars)")},
		{`{"input":"` + strings.Repeat("a", 300) + `"}`, 413, detail("request body is 312 bytes; the limit is 256 (gateway.max_body_bytes)")},
	} {
		e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", c.body, c.code, c.want)
	}
	e.expect(t, "POST", "/api/threads/t1/runs?wait=soon", "alice-key", `{"input":"hi"}`, 400, detail(`wait must be true or false, got "soon"`))
	// A chunked body without Content-Length is cut at the limit too.
	req, _ := http.NewRequest("POST", e.http.URL+"/api/threads/t1/runs", io.MultiReader(strings.NewReader(`{"input":"`), strings.NewReader(strings.Repeat("a", 400)), strings.NewReader(`"}`)))
	req.Header.Set("Authorization", "Bearer alice-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || strings.TrimSpace(string(b)) != detail("request body exceeds 256 bytes (gateway.max_body_bytes)") {
		t.Fatalf("chunked oversize body: %d %s", resp.StatusCode, b)
	}
	// Nothing was stored for the rejected requests.
	runs, err := e.store.ListRuns(context.Background(), "t1")
	if err != nil || len(runs) != 0 {
		t.Fatalf("rejected requests left runs: %v %v", runs, err)
	}
}

func decodeRun(t *testing.T, body string) store.Run {
	t.Helper()
	var r store.Run
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("decode run %q: %v", body, err)
	}
	return r
}

func TestRunWaitPersistsCompletionAndTrace(t *testing.T) {
	e := authEnv(t)
	e.expect(t, "POST", "/api/threads", "alice-key", `{"thread_id":"t1"}`, 201, "")
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"please delegate this"}`, 200, ""))
	if run.Status != store.StatusSuccess || run.ModelName != "scripted-test" || run.UserID != "alice" || run.FinishedAt == nil {
		t.Fatalf("run = %+v", run)
	}
	u := run.Usage
	// lead 240 + 330, subagent 57 (external record on scripted-sub).
	if u.TotalTokens != 627 || u.LeadAgentTokens != 570 || u.SubagentTokens != 57 || u.LLMCallCount != 2 {
		t.Fatalf("usage = %+v", u)
	}
	if u.TokenUsageByModel["scripted-test"].TotalTokens != 570 || u.TokenUsageByModel["scripted-test"].CacheReadTokens != 384 || u.TokenUsageByModel["scripted-sub"].TotalTokens != 57 {
		t.Fatalf("by model = %+v", u.TokenUsageByModel)
	}
	if len(run.TraceID) != 32 || run.TraceID == strings.Repeat("0", 32) {
		t.Fatalf("trace id = %q", run.TraceID)
	}
	if u.FirstHumanMessage != "please delegate this" || u.LastAIMessage != "The subagent counted to three." {
		t.Fatalf("message summary = %q / %q", u.FirstHumanMessage, u.LastAIMessage)
	}
	got := decodeRun(t, e.expect(t, "GET", "/api/threads/t1/runs/"+run.RunID, "alice-key", "", 200, ""))
	if got.TraceID != run.TraceID || got.Usage.TotalTokens != 627 {
		t.Fatalf("GET run = %+v", got)
	}
	e.expect(t, "GET", "/api/threads/t1/token-usage", "alice-key", "", 200,
		`{"thread_id":"t1","total_tokens":627,"total_input_tokens":550,"total_output_tokens":77,"total_runs":1,"by_model":{"scripted-sub":{"tokens":57,"runs":1},"scripted-test":{"tokens":570,"runs":1}},"by_caller":{"lead_agent":570,"subagent":57,"middleware":0},"context_usage":{"token_count":330,"max_context_tokens":1000,"percentage":33.0}}`)
	var th threadResponse
	if err := json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/t1", "alice-key", "", 200, "")), &th); err != nil {
		t.Fatal(err)
	}
	if th.UserID != "alice" || len(th.Runs) != 1 || th.Runs[0].RunID != run.RunID {
		t.Fatalf("thread = %+v", th)
	}
}

func TestRunOnUnknownThreadCreatesIt(t *testing.T) {
	e := authEnv(t)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/fresh/runs", "alice-key", `{"input":"hello"}`, 202, ""))
	if run.Status != store.StatusPending || run.RunID == "" {
		t.Fatalf("accepted run = %+v", run)
	}
	th, err := e.store.GetThread(context.Background(), "fresh")
	if err != nil || th.UserID != "alice" {
		t.Fatalf("thread = %+v, %v", th, err)
	}
	e.expect(t, "POST", "/api/threads", "alice-key", `{"thread_id":"fresh"}`, 409, detail("Thread fresh already exists"))
	e.expect(t, "GET", "/api/threads/fresh/runs/"+run.RunID+"/stream", "alice-key", "", 200, "")
	got := decodeRun(t, e.expect(t, "GET", "/api/threads/fresh/runs/"+run.RunID, "alice-key", "", 200, ""))
	if got.Status != store.StatusSuccess || got.Usage.TotalTokens != 120 {
		t.Fatalf("finished run = %+v", got)
	}
}

func TestFailedRunIsError(t *testing.T) {
	e := authEnv(t)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"this will fail"}`, 200, ""))
	if run.Status != store.StatusError || !strings.Contains(run.Error, "bad request from the provider") {
		t.Fatalf("run = %+v", run)
	}
}

type event struct {
	name string
	data map[string]any
}

func readSSE(t *testing.T, e *env, path string) []event {
	t.Helper()
	req, _ := http.NewRequest("GET", e.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer alice-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, ct)
	}
	var out []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur = event{name: strings.TrimPrefix(line, "event: ")}
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("event %s data: %v", cur.name, err)
			}
		case line == "" && cur.name != "":
			out = append(out, cur)
			cur = event{}
		}
	}
	return out
}

func TestStreamMessagesTaskEventsAndUsage(t *testing.T) {
	e := authEnv(t)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"delegate please"}`, 202, ""))
	for _, attempt := range []string{"live", "replay"} {
		evs := readSSE(t, e, "/api/threads/t1/runs/"+run.RunID+"/stream")
		var names []string
		for _, ev := range evs {
			names = append(names, ev.name)
		}
		if got := strings.Join(names, ","); got != "metadata,messages,task_started,task_running,task_completed,messages,messages,end" {
			t.Fatalf("%s: events = %s", attempt, got)
		}
		first := evs[1].data
		um, _ := first["usage_metadata"].(map[string]any)
		if um["input_tokens"] != float64(200) || um["output_tokens"] != float64(40) || um["total_tokens"] != float64(240) {
			t.Fatalf("%s: first AI message usage = %v", attempt, first)
		}
		done := evs[4].data
		usage, _ := done["usage"].(map[string]any)
		if done["task_id"] != "call_task_1" || done["result"] != "one two three" || usage["total_tokens"] != float64(57) || done["model_name"] != "scripted-test" {
			t.Fatalf("%s: task_completed = %v", attempt, done)
		}
		if evs[6].data["type"] != "tool" && evs[6].data["role"] != "tool" {
			t.Fatalf("%s: tool message event = %v", attempt, evs[6].data)
		}
		end := evs[7].data
		cum, _ := end["usage"].(map[string]any)
		if end["status"] != "success" || cum["input_tokens"] != float64(500) || cum["output_tokens"] != float64(70) || cum["total_tokens"] != float64(570) {
			t.Fatalf("%s: end = %v", attempt, end)
		}
		if end["trace_id"] == nil {
			t.Fatalf("%s: end event without trace id: %v", attempt, end)
		}
	}
}

func TestCancelMarksInterrupted(t *testing.T) {
	e := authEnv(t)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"be slow"}`, 202, ""))
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _ := e.store.GetRun(context.Background(), run.RunID)
		if r.Status == store.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run never started: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 202, ""))
	if got.Status != store.StatusInterrupted || got.Error != errCancelled.Error() {
		t.Fatalf("cancelled run = %+v", got)
	}
	e.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 409, detail("Run "+run.RunID+" already finished with status interrupted"))
	e.expect(t, "POST", "/api/threads/t1/runs/run-missing/cancel", "alice-key", "", 404, detail("Run run-missing not found"))
	// Interrupted runs are never counted.
	e.expect(t, "GET", "/api/threads/t1/token-usage?include_active=true", "alice-key", "", 200, "")
	u, _ := e.store.AggregateTokensByThread(context.Background(), "t1", true)
	if u.TotalRuns != 0 {
		t.Fatalf("interrupted run counted: %+v", u)
	}
}

func TestShutdownFinishesShortRunsAndInterruptsTheRest(t *testing.T) {
	e := authEnv(t)
	slow := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"slow one"}`, 202, ""))
	brief := decodeRun(t, e.expect(t, "POST", "/api/threads/t2/runs", "alice-key", `{"input":"brief one"}`, 202, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	for id, want := range map[string]store.Status{slow.RunID: store.StatusInterrupted, brief.RunID: store.StatusSuccess} {
		r, err := e.store.GetRun(context.Background(), id)
		if err != nil || r.Status != want || r.FinishedAt == nil {
			t.Fatalf("run %s after shutdown = %+v, %v; want %s", id, r, err, want)
		}
	}
	e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"too late"}`, 503, detail("the gateway is shutting down; no new runs are accepted"))
	e.expect(t, "GET", "/healthz", "", "", 503, "")
}

func TestMetrics(t *testing.T) {
	e := authEnv(t)
	e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"delegate it"}`, 200, "")
	e.expect(t, "POST", "/api/threads/t2/runs?wait=true", "alice-key", `{"input":"hello"}`, 200, "")
	e.expect(t, "POST", "/api/threads/t3/runs?wait=true", "alice-key", `{"input":"fail now"}`, 200, "")
	body := e.expect(t, "GET", "/metrics", "", "", 200, "")
	for _, want := range []string{
		`agentmeter_gateway_runs_total{status="success"} 2`,
		`agentmeter_gateway_runs_total{status="error"} 1`,
		`agentmeter_gateway_runs_active 0`,
		`agentmeter_gateway_tokens_total{model="scripted-test",token_type="total"} 690`,
		`agentmeter_gateway_tokens_total{model="scripted-test",token_type="cache_read"} 384`,
		`agentmeter_gateway_tokens_total{model="scripted-sub",token_type="input"} 50`,
		`agentmeter_gateway_caller_tokens_total{caller="lead_agent"} 690`,
		`agentmeter_gateway_caller_tokens_total{caller="subagent"} 57`,
		`agentmeter_gateway_run_duration_seconds_count{status="success"} 2`,
		`agentmeter_gateway_http_requests_total{code="200",route="/api/threads/{thread_id}/runs"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "t1") || strings.Contains(body, "t2") || strings.Contains(body, "alice") {
		t.Error("metrics carry a thread or user id")
	}
	e.expect(t, "GET", "/healthz", "", "", 200, `{"status":"ok"}`)
}

func TestLocalModeNeedsNoKey(t *testing.T) {
	e := newEnv(t, Config{})
	if !e.srv.LocalMode() {
		t.Fatal("no api_keys but not local mode")
	}
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "", `{"input":"hello"}`, 200, ""))
	if run.UserID != LocalUser || run.Status != store.StatusSuccess {
		t.Fatalf("local run = %+v", run)
	}
}

func TestContextUsagePayload(t *testing.T) {
	cu := buildContextUsage(350, 1000)
	b, _ := json.Marshal(cu)
	if string(b) != `{"token_count":350,"max_context_tokens":1000,"percentage":35.0}` {
		t.Fatalf("350/1000 = %s", b)
	}
	b, _ = json.Marshal(buildContextUsage(250, 0))
	if string(b) != `{"token_count":250,"max_context_tokens":null,"percentage":null}` {
		t.Fatalf("unknown capacity = %s", b)
	}
	b, _ = json.Marshal(buildContextUsage(1, 3))
	if string(b) != `{"token_count":1,"max_context_tokens":3,"percentage":33.3}` {
		t.Fatalf("rounding = %s", b)
	}
	// Python's json always writes a float with a fraction.
	for in, want := range map[PyFloat]string{0: "0.0", 100: "100.0", 250.5: "250.5", 0.1: "0.1", 12345678: "12345678.0"} {
		if got, err := json.Marshal(in); err != nil || string(got) != want {
			t.Errorf("PyFloat(%v) = %s, %v; want %s", float64(in), got, err, want)
		}
	}
}

func TestRunTimeout(t *testing.T) {
	e := newEnv(t, Config{APIKeys: testKeys(), RunTimeout: 200 * time.Millisecond})
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"slow again"}`, 200, ""))
	if run.Status != store.StatusTimeout || run.Error != "run exceeded gateway.run_timeout (200ms)" {
		t.Fatalf("run = %+v", run)
	}
}

// A running run's progress snapshots reach the store and show with include_active only.
func TestIncludeActiveSeesLiveProgress(t *testing.T) {
	e := authEnv(t)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"show progress"}`, 202, ""))
	want := `{"thread_id":"t1","total_tokens":110,"total_input_tokens":100,"total_output_tokens":10,"total_runs":1,"by_model":{"scripted-test":{"tokens":110,"runs":1}},"by_caller":{"lead_agent":110,"subagent":0,"middleware":0},"context_usage":{"token_count":110,"max_context_tokens":1000,"percentage":11.0}}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, got := e.do(t, "GET", "/api/threads/t1/token-usage?include_active=true", "alice-key", "")
		if strings.TrimSpace(got) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("include_active never showed the progress snapshot; last %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.expect(t, "GET", "/api/threads/t1/token-usage", "alice-key", "", 200,
		`{"thread_id":"t1","total_tokens":0,"total_input_tokens":0,"total_output_tokens":0,"total_runs":0,"by_model":{},"by_caller":{"lead_agent":0,"subagent":0,"middleware":0},"context_usage":{"token_count":110,"max_context_tokens":1000,"percentage":11.0}}`)
	got := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 202, ""))
	// The interrupted row keeps the counters of the work done.
	if got.Status != store.StatusInterrupted || got.Usage.TotalTokens != 110 {
		t.Fatalf("cancelled run = %+v", got)
	}
}

// A run this process does not execute (another replica's, or from before a restart)
// streams its end event once the store shows it final.
func TestStreamOfRunFromElsewhere(t *testing.T) {
	e := authEnv(t)
	ctx := context.Background()
	if err := e.store.CreateRun(ctx, store.Run{RunID: "remote", ThreadID: "t1", Status: store.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = e.store.UpdateRunCompletion(ctx, "remote", store.Completion{Status: store.StatusSuccess,
			Usage: journalUsage(42)})
	}()
	evs := readSSE(t, e, "/api/threads/t1/runs/remote/stream")
	if len(evs) != 1 || evs[0].name != "end" || evs[0].data["status"] != "success" {
		t.Fatalf("events = %+v", evs)
	}
	tu, _ := evs[0].data["token_usage"].(map[string]any)
	if tu["total_tokens"] != float64(42) {
		t.Fatalf("end = %+v", evs[0].data)
	}
}
