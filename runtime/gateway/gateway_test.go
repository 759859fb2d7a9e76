package gateway

import (
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
	return e.send(t, method, path, key, "", rd)
}

// send sends a request with the given body and content type (both optional) and returns
// the status and body.
func (e *env) send(t *testing.T, method, path, key, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
