//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// threadsScript drives the thread tests: a conversation over two runs, one over five
// queued runs, an upload read by two tools, and a delegation to two subagents (each
// 150 ms, so whether they overlap is visible in the spans).
const threadsScript = `
conversations:
  - name: remember
    caller: lead_agent
    first_human_contains: "remember"
    turns:
      - {content: "noted: blue", usage: {input: 100, output: 10}}
      - {content: "you said blue", usage: {input: 200, output: 10}}
  - name: queue
    caller: lead_agent
    first_human_contains: "queue"
    turns:
      - {content: "answer 1", delay: 150ms, usage: {input: 10, output: 1}}
      - {content: "answer 2", delay: 150ms, usage: {input: 20, output: 1}}
      - {content: "answer 3", delay: 150ms, usage: {input: 30, output: 1}}
      - {content: "answer 4", delay: 150ms, usage: {input: 40, output: 1}}
      - {content: "answer 5", delay: 150ms, usage: {input: 50, output: 1}}
  - name: upload
    caller: lead_agent
    first_human_contains: "uploaded"
    turns:
      - tool_calls: [{id: call_read, name: read_file, args: {path: /mnt/user-data/uploads/notes.txt, description: "Read the upload"}}]
        usage: {input: 10, output: 5}
      - {content: "The file says hello.", usage: {input: 20, output: 5}}
  - name: delegate
    caller: lead_agent
    first_human_contains: "delegate"
    turns:
      - tool_calls:
          - {id: call_a, name: task, args: {description: "Alpha", subagent_type: general-purpose, prompt: "alpha job"}}
          - {id: call_b, name: task, args: {description: "Beta", subagent_type: general-purpose, prompt: "beta job"}}
        usage: {input: 300, output: 30}
      - {content: "Both done.", usage: {input: 400, output: 20}}
  - name: alpha
    caller: "subagent:general-purpose"
    first_human_contains: "alpha job"
    turns: [{content: "alpha result", delay: 150ms, usage: {input: 50, output: 5}}]
  - name: beta
    caller: "subagent:general-purpose"
    first_human_contains: "beta job"
    turns: [{content: "beta result", delay: 150ms, usage: {input: 60, output: 6}}]
  - name: title
    caller: "middleware:title"
    turns: [{content: "A thread", usage: {input: 40, output: 3}}]
`

type threadsGateway struct {
	*gatewayProcess
	sink *TraceSink
	key  string
}

func startThreadsGateway(t *testing.T) *threadsGateway {
	dir := t.TempDir()
	sink := StartTraceSink(t, dir)
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte(threadsScript), 0o600))
	const key = "e2e-threads-key"
	g := startGateway(t, dir, fmt.Sprintf(`
models:
  - {name: main, provider: scripted, model: scripted-threads, script: %s, context_window: 128000}
subagents: {max_concurrent: 1}
sandbox: {root: %s}
settings:
  runtime: {base_dir: %s}
telemetry: {capture_content: true}
gateway:
  api_keys:
    - {key_env: AGENTMETER_E2E_THREADS_KEY, user_id: alice, scopes: [threads:read, threads:write]}
store: {driver: sqlite, dsn: %s}
`, script, filepath.Join(dir, "threads"), filepath.Join(dir, "base"), filepath.Join(dir, "data", "agentmeter.db")),
		"AGENTMETER_E2E_THREADS_KEY="+key,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+sink.OTLP,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)
	return &threadsGateway{gatewayProcess: g, sink: sink, key: key}
}

type threadRun struct {
	gatewayRun
	Error      string `json:"error"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		TotalTokens      int64  `json:"total_tokens"`
		MiddlewareTokens int64  `json:"middleware_tokens"`
		SubagentTokens   int64  `json:"subagent_tokens"`
		LLMCallCount     int64  `json:"llm_call_count"`
		LastAIMessage    string `json:"last_ai_message"`
	} `json:"usage"`
}

func (g *threadsGateway) run(t *testing.T, thread, body string) threadRun {
	t.Helper()
	code, b := g.request(t, "POST", "/api/threads/"+thread+"/runs?wait=true", g.key, body)
	require.Equal(t, 200, code, string(b))
	var r threadRun
	require.NoError(t, json.Unmarshal(b, &r))
	require.Equal(t, "success", r.Status, string(b))
	return r
}

// spansOf waits until the collector has the run's spans (through its invoke_agent root).
func (g *threadsGateway) spansOf(t *testing.T, runID string) []ptrace.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tds, _ := ReadTraces(g.sink.Traces)
		var out []ptrace.Span
		root := false
		for _, sp := range Spans(tds) {
			if Str(sp, genai.AttrRunID) == runID {
				out = append(out, sp)
				root = root || (Str(sp, genai.AttrOperationName) == genai.OpInvokeAgent && Str(sp, genai.AttrAgentName) == genai.LeadAgentName)
			}
		}
		if root {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spans of run %s never reached the collector", runID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestGatewayThreads(t *testing.T) {
	g := startThreadsGateway(t)

	t.Run("TwoRunsOneThread", func(t *testing.T) {
		r1 := g.run(t, "t-two", `{"input":"remember blue"}`)
		r2 := g.run(t, "t-two", `{"input":"what did I say?"}`)
		assert.Equal(t, "you said blue", r2.Usage.LastAIMessage, "the second run reached turn 2: the model saw the first run")
		// The second run's model request carries the first run's messages.
		var leadInput string
		for _, sp := range g.spansOf(t, r2.RunID) {
			if Str(sp, genai.AttrOperationName) == genai.OpChat && Str(sp, genai.AttrCaller) == genai.BucketLeadAgent {
				leadInput = Str(sp, genai.AttrInputMessages)
			}
		}
		assert.Contains(t, leadInput, "remember blue")
		assert.Contains(t, leadInput, "noted: blue")
		assert.Contains(t, leadInput, "what did I say?")
		// One title call, in the first run; the thread's middleware bucket holds it once.
		titles := 0
		for _, r := range []threadRun{r1, r2} {
			for _, sp := range g.spansOf(t, r.RunID) {
				if Str(sp, genai.AttrCaller) == "middleware:title" && Str(sp, genai.AttrOperationName) == genai.OpChat {
					titles++
				}
			}
		}
		assert.Equal(t, 1, titles)
		assert.Equal(t, int64(43), r1.Usage.MiddlewareTokens)
		assert.Equal(t, int64(0), r2.Usage.MiddlewareTokens)
		code, body := g.request(t, "GET", "/api/threads/t-two/token-usage", g.key, "")
		require.Equal(t, 200, code)
		var tu struct {
			ByCaller map[string]int64 `json:"by_caller"`
		}
		require.NoError(t, json.Unmarshal(body, &tu))
		assert.Equal(t, int64(43), tu.ByCaller["middleware"])
		code, body = g.request(t, "GET", "/api/threads/t-two", g.key, "")
		require.Equal(t, 200, code)
		assert.Contains(t, string(body), `"title":"A thread"`)
	})

	t.Run("FiveAtOnceRejected", func(t *testing.T) {
		codes := make([]int, 5)
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = g.request(t, "POST", "/api/threads/t-five/runs", g.key, `{"input":"queue please"}`)
			}()
		}
		wg.Wait()
		sort.Ints(codes)
		assert.Equal(t, []int{202, 409, 409, 409, 409}, codes)
	})

	t.Run("FiveEnqueuedInOrder", func(t *testing.T) {
		var ids []string
		for range 5 {
			code, b := g.request(t, "POST", "/api/threads/t-queue/runs", g.key, `{"input":"queue please","multitask_strategy":"enqueue"}`)
			require.Equal(t, 202, code, string(b))
			var r threadRun
			require.NoError(t, json.Unmarshal(b, &r))
			ids = append(ids, r.RunID)
		}
		for i, id := range ids {
			var r threadRun
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, b := g.request(t, "GET", "/api/threads/t-queue/runs/"+id, g.key, "")
				require.Equal(t, 200, code)
				require.NoError(t, json.Unmarshal(b, &r))
				if r.Status != "pending" && r.Status != "running" {
					break
				}
				require.True(t, time.Now().Before(deadline), "run %d never finished", i+1)
				time.Sleep(50 * time.Millisecond)
			}
			assert.Equal(t, "success", r.Status)
			assert.Equal(t, fmt.Sprintf("answer %d", i+1), r.Usage.LastAIMessage, "run %d saw the %d runs before it", i+1, i)
			assert.Equal(t, "", r.StopReason, "no run cut another short")
		}
	})

	t.Run("Traceparent", func(t *testing.T) {
		req, _ := http.NewRequest("POST", g.URL+"/api/threads/t-trace/runs?wait=true", strings.NewReader(`{"input":"remember the trace"}`))
		req.Header.Set("Authorization", "Bearer "+g.key)
		req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var r threadRun
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		resp.Body.Close()
		require.Equal(t, "0af7651916cd43dd8448eb211c80319c", r.TraceID)
		var root *ptrace.Span
		for _, sp := range g.spansOf(t, r.RunID) {
			if Str(sp, genai.AttrOperationName) == genai.OpInvokeAgent && Str(sp, genai.AttrAgentName) == genai.LeadAgentName {
				root = &sp
			}
		}
		require.NotNil(t, root)
		assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", root.TraceID().String())
		assert.Equal(t, "b7ad6b7169203331", root.ParentSpanID().String(), "the caller's span is the root's parent")
	})

	t.Run("UploadReadByATool", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		require.NoError(t, mw.WriteField("input", "Read what I uploaded"))
		fw, err := mw.CreateFormFile("files", "notes.txt")
		require.NoError(t, err)
		_, _ = io.WriteString(fw, "hello from the uploaded file")
		require.NoError(t, mw.Close())
		req, _ := http.NewRequest("POST", g.URL+"/api/threads/t-upload/runs?wait=true", &buf)
		req.Header.Set("Authorization", "Bearer "+g.key)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, string(b))
		code, body := g.request(t, "GET", "/api/threads/t-upload/state", g.key, "")
		require.Equal(t, 200, code)
		var st struct {
			Values struct {
				Messages []struct {
					Type    string `json:"type"`
					Content string `json:"content"`
					Status  string `json:"status"`
				} `json:"messages"`
			} `json:"values"`
		}
		require.NoError(t, json.Unmarshal(body, &st))
		var human, tool string
		for _, m := range st.Values.Messages {
			switch {
			case m.Type == "human" && strings.Contains(m.Content, "Read what I uploaded"):
				human = m.Content
			case m.Type == "tool":
				tool = m.Content
				assert.NotEqual(t, "error", m.Status)
			}
		}
		assert.Contains(t, human, "/mnt/user-data/uploads/notes.txt", "UploadsMiddleware showed the model the virtual path")
		assert.Contains(t, tool, "hello from the uploaded file", "read_file read the upload through the sandbox mount")
	})

	t.Run("FiftyRunsPerRunSubagentLimit", func(t *testing.T) {
		runs := make([]threadRun, 50)
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runs[i] = g.run(t, fmt.Sprintf("t-fifty-%d", i), `{"input":"delegate both"}`)
			}()
		}
		wg.Wait()
		type span struct{ start, end time.Time }
		var all []span
		for _, r := range runs {
			// Whole: both subagents, both lead calls and the title call counted.
			assert.Equal(t, int64(121), r.Usage.SubagentTokens, "run %s", r.RunID)
			assert.Equal(t, int64(750+121+43), r.Usage.TotalTokens, "run %s", r.RunID)
			assert.Equal(t, "Both done.", r.Usage.LastAIMessage)
			var subs []span
			for _, sp := range g.spansOf(t, r.RunID) {
				if Str(sp, genai.AttrOperationName) == genai.OpInvokeAgent && Str(sp, genai.AttrAgentName) == "general-purpose" {
					subs = append(subs, span{sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime()})
				}
			}
			require.Len(t, subs, 2, "run %s", r.RunID)
			// subagents.max_concurrent 1 holds within the run: its subagents never overlap.
			assert.False(t, subs[0].start.Before(subs[1].end) && subs[1].start.Before(subs[0].end),
				"run %s ran two subagents at once", r.RunID)
			all = append(all, subs...)
		}
		// ... but it is per run: subagents of different runs did run at the same time.
		overlap := false
		for i := range all {
			for j := i + 1; j < len(all) && !overlap; j++ {
				overlap = all[i].start.Before(all[j].end) && all[j].start.Before(all[i].end)
			}
		}
		assert.True(t, overlap, "no two runs' subagents overlapped: the limit is global, not per run")
	})
}
