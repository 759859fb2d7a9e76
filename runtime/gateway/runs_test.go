package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/store"
)

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
