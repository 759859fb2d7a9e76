//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// gatewayRun is the part of a run row the test reads.
type gatewayRun struct {
	RunID    string `json:"run_id"`
	ThreadID string `json:"thread_id"`
	Status   string `json:"status"`
	TraceID  string `json:"trace_id"`
	Usage    struct {
		TotalTokens      int64 `json:"total_tokens"`
		LeadAgentTokens  int64 `json:"lead_agent_tokens"`
		SubagentTokens   int64 `json:"subagent_tokens"`
		MiddlewareTokens int64 `json:"middleware_tokens"`
	} `json:"usage"`
}

// gatewayProcess is a running `agentmeter serve`.
type gatewayProcess struct {
	*process
	URL string
}

func startGateway(t *testing.T, dir, configYAML string, env ...string) *gatewayProcess {
	t.Helper()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(configYAML), 0o600))
	addr := FreeAddr(t)
	g := &gatewayProcess{URL: "http://" + addr,
		process: startProcess(t, dir, env, AgentmeterBinary(t), "serve", "--config", cfgPath, "--listen", addr)}
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("agentmeter serve logs:\n%s", g.logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(g.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		select {
		case <-g.Done():
			t.Fatalf("agentmeter serve exited at start:\n%s", g.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentmeter serve not ready: %v\n%s", err, g.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (g *gatewayProcess) stop(t *testing.T) {
	if exited, _ := g.Exited(); exited {
		return
	}
	if g.Process.Stop(40 * time.Second) {
		t.Errorf("agentmeter serve ignored SIGTERM")
		return
	}
	if err := g.Err(); err != nil {
		t.Errorf("agentmeter serve exited: %v", err)
	}
}

func (g *gatewayProcess) request(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.URL+path, rd)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// journalTotal reads a finished run's stream: the end event carries the journal's totals.
func (g *gatewayProcess) journalTotal(t *testing.T, key, threadID, runID string) int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", g.URL+"/api/threads/"+threadID+"/runs/"+runID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ev := ""
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			ev = strings.TrimPrefix(line, "event: ")
		}
		if ev == "end" && strings.HasPrefix(line, "data: ") {
			var end struct {
				Status     string `json:"status"`
				TokenUsage struct {
					TotalTokens int64 `json:"total_tokens"`
				} `json:"token_usage"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &end))
			require.Equal(t, "success", end.Status)
			return end.TokenUsage.TotalTokens
		}
	}
	t.Fatalf("stream of %s ended without an end event", runID)
	return 0
}

// demoGatewayConfig serves the demo's scripted model from a SQLite store in dir, with
// one read-write key for alice, read from AGENTMETER_E2E_GATEWAY_KEY.
func demoGatewayConfig(dir string) string {
	return fmt.Sprintf(`
models:
  - name: main
    provider: scripted
    model: scripted-demo
    context_window: 128000
sandbox:
  root: %s
gateway:
  api_keys:
    - key_env: AGENTMETER_E2E_GATEWAY_KEY
      user_id: alice
      scopes: [threads:read, threads:write]
store:
  driver: sqlite
  dsn: %s
`, filepath.Join(dir, "threads"), filepath.Join(dir, "data", "agentmeter.db"))
}

// TestGatewayEndToEnd runs `agentmeter serve` (demo scripted model, SQLite store, an API
// key from the environment) exporting spans to the collector, scraped by a real
// Prometheus: PromQL over the gateway's token counters equals the sum of the runs'
// journals, every run row records a trace id that the collector received, and SIGTERM
// shuts the gateway down cleanly.
func TestGatewayEndToEnd(t *testing.T) {
	dir := t.TempDir()
	sink := StartTraceSink(t, dir)

	const key = "e2e-gateway-key"
	g := startGateway(t, dir, demoGatewayConfig(dir),
		"AGENTMETER_E2E_GATEWAY_KEY="+key,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+sink.OTLP,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)
	code, body := g.request(t, "GET", "/api/threads/t-a/token-usage", "", "")
	require.Equal(t, 401, code, string(body))

	prom := StartPrometheus(t, PrometheusOptions{Jobs: []ScrapeJob{{Name: "gateway", Targets: []string{strings.TrimPrefix(g.URL, "http://")}}}})
	prom.WaitForTargetsUp(t, "gateway", 1, 30*time.Second)

	var runs []gatewayRun
	for i, thread := range []string{"t-a", "t-a", "t-b"} {
		code, body := g.request(t, "POST", "/api/threads/"+thread+"/runs?wait=true", key, fmt.Sprintf(`{"input":"Compare Paris and Tokyo (%d)"}`, i))
		require.Equal(t, 200, code, string(body))
		var r gatewayRun
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, "success", r.Status, string(body))
		runs = append(runs, r)
	}
	var journals, lead, sub, mw int64
	for _, r := range runs {
		j := g.journalTotal(t, key, r.ThreadID, r.RunID)
		require.Equal(t, j, r.Usage.TotalTokens, "run row total vs journal of %s", r.RunID)
		journals += j
		lead, sub, mw = lead+r.Usage.LeadAgentTokens, sub+r.Usage.SubagentTokens, mw+r.Usage.MiddlewareTokens
	}
	require.Positive(t, sub, "the demo dispatches subagents")
	require.Positive(t, mw, "the demo makes a middleware call")

	// Per thread, token-usage equals the runs' journals too.
	code, body = g.request(t, "GET", "/api/threads/t-a/token-usage", key, "")
	require.Equal(t, 200, code)
	var tu struct {
		TotalTokens int64 `json:"total_tokens"`
		TotalRuns   int64 `json:"total_runs"`
	}
	require.NoError(t, json.Unmarshal(body, &tu))
	assert.Equal(t, runs[0].Usage.TotalTokens+runs[1].Usage.TotalTokens, tu.TotalTokens)
	assert.Equal(t, int64(2), tu.TotalRuns)

	// What Prometheus scraped equals the journals.
	prom.WaitForValue(t, `sum(agentmeter_gateway_caller_tokens_total{job="gateway"})`, float64(journals), 30*time.Second)
	prom.WaitForValue(t, `sum(agentmeter_gateway_tokens_total{job="gateway",token_type="total"})`, float64(journals), 30*time.Second)
	prom.WaitForValue(t, `sum(agentmeter_gateway_runs_total{job="gateway",status="success"})`, 3, 30*time.Second)
	byCaller, err := prom.QueryByLabel(context.Background(), `sum by (caller) (agentmeter_gateway_caller_tokens_total{job="gateway"})`, "caller")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{genai.BucketLeadAgent: float64(lead), genai.BucketSubagent: float64(sub), genai.BucketMiddleware: float64(mw)}, byCaller)
	prom.WaitForValue(t, `sum(agentmeter_gateway_run_duration_seconds_count{job="gateway"})`, 3, 30*time.Second)

	// Every run row names a trace the collector received, and that trace is the run's
	// (its spans carry agentmeter.run.id).
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range runs {
		require.Len(t, r.TraceID, 32, "run %s has no trace id", r.RunID)
		for {
			tds, _ := ReadTraces(sink.Traces)
			found := false
			for _, sp := range Spans(tds) {
				if sp.TraceID().String() == r.TraceID && Str(sp, genai.AttrRunID) == r.RunID {
					found = true
					break
				}
			}
			if found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trace %s of run %s never reached the collector", r.TraceID, r.RunID)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	g.stop(t)
	assert.Contains(t, g.logs.String(), "shutting down")
}
