//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// sidecarPorts are the addresses of one collector started from the shipped
// otelcol-config.yaml; the config reads them from AGENTMETER_* environment variables.
type sidecarPorts struct {
	OTLPGRPC, OTLPHTTP, Prometheus, Health, AgentUsage string
	Telemetry                                          int
}

// setSidecarEnv points the shipped config at free loopback ports (t.Setenv, so the
// collector process started next inherits them).
func setSidecarEnv(t testing.TB) sidecarPorts {
	t.Helper()
	p := sidecarPorts{
		OTLPGRPC:   FreeAddr(t),
		OTLPHTTP:   FreeAddr(t),
		Prometheus: FreeAddr(t),
		Health:     FreeAddr(t),
		AgentUsage: FreeAddr(t),
		Telemetry:  FreePort(t),
	}
	t.Setenv("AGENTMETER_OTLP_GRPC_ENDPOINT", p.OTLPGRPC)
	t.Setenv("AGENTMETER_OTLP_HTTP_ENDPOINT", p.OTLPHTTP)
	t.Setenv("AGENTMETER_PROMETHEUS_ENDPOINT", p.Prometheus)
	t.Setenv("AGENTMETER_HEALTH_ENDPOINT", p.Health)
	t.Setenv("AGENTMETER_AGENTUSAGE_ENDPOINT", p.AgentUsage)
	t.Setenv("AGENTMETER_TELEMETRY_PORT", fmt.Sprint(p.Telemetry))
	// each collector its own store (file_storage locks its files)
	t.Setenv("AGENTMETER_STORAGE_DIR", t.TempDir())
	// vendor exporters off whatever the developer's shell says (the first non-empty
	// DeerFlow variable decides); a test that wants them sets them after this
	t.Setenv("LANGSMITH_TRACING", "false")
	t.Setenv("LANGFUSE_TRACING", "false")
	return p
}

// startShippedWithFile runs the collector on otelcol-config.yaml plus make demo's overlay,
// which appends a file exporter ($AGENTMETER_DEMO_TRACES_FILE) to the traces pipeline,
// in a new folder; it returns the file the exporter writes.
func startShippedWithFile(t testing.TB, ports sidecarPorts) string {
	t.Helper()
	dir := t.TempDir()
	tracesFile := filepath.Join(dir, "traces.jsonl")
	t.Setenv("AGENTMETER_DEMO_TRACES_FILE", tracesFile)
	StartWithArgs(t, dir, ports.OTLPHTTP,
		"--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
		"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
		"--feature-gates=confmap.enableMergeAppendOption")
	return tracesFile
}

// scrapeShipped starts Prometheus scraping the shipped config's prometheus exporters at
// targets (job agentmeter, honor_labels as in deploy/) and waits until all are up.
func scrapeShipped(t *testing.T, targets ...string) *Prometheus {
	t.Helper()
	prom := StartPrometheus(t, PrometheusOptions{Jobs: []ScrapeJob{{Name: "agentmeter", Targets: targets, HonorLabels: true}}})
	prom.WaitForTargetsUp(t, "agentmeter", len(targets), 30*time.Second)
	return prom
}

// The shipped config is valid for the distribution built from builder-config.yaml, with
// the default environment (every exporter off).
func TestSidecarConfigValidates(t *testing.T) {
	setSidecarEnv(t)
	bin := CollectorBinary(t)
	cmd := exec.Command(bin, "validate", "--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "validate otelcol-config.yaml:\n%s", out)
}

// chatSpan is one synthetic model call for the token-metrics test.
type chatSpan struct {
	caller, agentAttr, model, provider string
	responseModel                      string       // gen_ai.response.model when the provider answered with another name
	usage                              *genai.Usage // nil: the call reported no usage
	cacheWriteOnly                     bool         // report cache creation under the newer cache_write key
	dispatches                         bool         // this lead call asks for the trace's `task` tool call
}

// buildTrace makes one run: the lead invoke_agent span; the lead's and middlewares' chat
// spans under it; when a call dispatches, an `execute_tool task` span with an
// `invoke_agent <name>` child holding every subagent's chat spans, so subagentmerge merges
// their usage onto the dispatching call (docs/contract.md#merge).
func buildTrace(traceID byte, calls []chatSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "synthetic-agent")
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	tid := pcommon.TraceID{traceID, 0xaa}
	next := byte(1)
	span := func(parent pcommon.SpanID, name, op string) ptrace.Span {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{traceID, next})
		next++
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(next) * time.Millisecond)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Second)))
		sp.Attributes().PutStr(genai.AttrOperationName, op)
		sp.Attributes().PutStr(genai.AttrRunID, fmt.Sprintf("run-%d", traceID))
		return sp
	}
	root := span(pcommon.SpanID{}, genai.SpanName(genai.OpInvokeAgent, genai.LeadAgentName), genai.OpInvokeAgent)
	root.Attributes().PutStr(genai.AttrAgentName, genai.LeadAgentName)
	callID := fmt.Sprintf("call_task_%d", traceID)
	var subParent pcommon.SpanID
	for _, c := range calls {
		parent := root.SpanID()
		if genai.CallerBucket(c.caller) == genai.BucketSubagent {
			if subParent.IsEmpty() {
				tool := span(root.SpanID(), genai.SpanName(genai.OpExecuteTool, genai.TaskToolName), genai.OpExecuteTool)
				tool.Attributes().PutStr(genai.AttrToolName, genai.TaskToolName)
				tool.Attributes().PutStr(genai.AttrToolCallID, callID)
				sub := span(tool.SpanID(), genai.SpanName(genai.OpInvokeAgent, "researcher"), genai.OpInvokeAgent)
				sub.Attributes().PutStr(genai.AttrAgentName, "researcher")
				sub.Attributes().PutStr(genai.AttrToolCallID, callID)
				subParent = sub.SpanID()
			}
			parent = subParent
		}
		sp := span(parent, genai.SpanName(genai.OpChat, c.model), genai.OpChat)
		sp.SetKind(ptrace.SpanKindClient)
		a := sp.Attributes()
		a.PutStr(genai.AttrRequestModel, c.model)
		a.PutStr(genai.AttrProviderName, c.provider)
		if c.responseModel != "" {
			a.PutStr(genai.AttrResponseModel, c.responseModel)
		}
		if c.caller != "" {
			a.PutStr(genai.AttrCaller, c.caller)
		}
		if c.agentAttr != "" {
			a.PutStr(genai.AttrAgentName, c.agentAttr)
		}
		if c.usage != nil {
			genai.PutUsage(a, *c.usage)
			if c.cacheWriteOnly && c.usage.CacheCreation != 0 {
				a.Remove(genai.AttrUsageCacheCreat)
				a.PutInt(genai.AttrUsageCacheWrite, c.usage.CacheCreation)
			}
		}
		if c.dispatches {
			genai.PutStrings(a, genai.AttrResponseToolCallIDs, []string{callID})
		}
	}
	return td
}

// tokenTally is what Prometheus must show for a set of chat spans.
type tokenTally struct {
	total    int64
	byCaller map[string]int64
	byType   map[string]int64
	byAgent  map[string]int64
	byModel  map[string]int64
	calls    int64 // spans with usage (histogram count per token type)
}

func (tt *tokenTally) add(agent string, c chatSpan) {
	if c.usage == nil {
		return
	}
	if tt.byCaller == nil {
		tt.byCaller, tt.byType, tt.byAgent, tt.byModel = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	tt.calls++
	for _, k := range c.usage.Kinds() {
		tt.total += k.Tokens
		tt.byCaller[genai.CallerBucket(c.caller)] += k.Tokens
		tt.byType[k.TokenType] += k.Tokens
		tt.byAgent[agent] += k.Tokens
		model := c.model
		if c.responseModel != "" {
			model = c.responseModel // the model label is the model that answered
		}
		tt.byModel[model] += k.Tokens
	}
}

func asFloats(m map[string]int64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if v != 0 {
			out[k] = float64(v)
		}
	}
	return out
}

func dropZeros(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Synthetic OTLP spans -> the shipped otelcol-config.yaml -> prometheus exporter -> a real
// Prometheus server: PromQL sums equal the spans' own usage, per caller bucket, token
// type, agent and model; merged subagent usage is never counted; the counter is
// cumulative across batches; the semconv histogram counts input and output.
func TestSidecarTokenMetricsInPrometheus(t *testing.T) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)

	u := func(in, out, cr, cc, rs int64) *genai.Usage {
		return &genai.Usage{Input: in, Output: out, CacheRead: cr, CacheCreation: cc, Reasoning: rs}
	}
	batches := [][]chatSpan{{
		// the dispatching call: subagentmerge adds the subagents' usage onto it as
		// agentmeter.subagent.*, which the metrics must not count a second time
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: u(1200, 80, 1000, 0, 0), dispatches: true},
		{caller: "subagent:researcher", model: "gpt-4o-mini", provider: "openai", usage: u(640, 210, 0, 0, 64)},
		{caller: "subagent:coder", model: "claude-sonnet", provider: "anthropic", usage: u(3000, 500, 0, 2048, 0), cacheWriteOnly: true},
		{caller: "middleware:title", model: "gpt-4o-mini", provider: "openai", usage: u(150, 12, 0, 0, 0)},
		{caller: "lead_agent", model: "gpt-4o", provider: "openai"}, // reported no usage
	}, {
		{caller: "", model: "gpt-4o", provider: "openai", usage: u(10, 5, 0, 0, 0)}, // untagged counts as lead
		{caller: "subagent:researcher", agentAttr: "researcher-v2", model: "gpt-4o-mini", provider: "openai", usage: u(77, 33, 7, 3, 11)},
		{caller: "middleware:summarize", model: "o3", responseModel: "o3-2025-04-16", provider: "openai", usage: u(5000, 2500, 4000, 0, 2000)},
	}}

	var want tokenTally
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, calls := range batches {
		for _, c := range calls {
			agent := genai.LeadAgentName
			switch {
			case c.agentAttr != "":
				agent = c.agentAttr
			case genai.CallerBucket(c.caller) == genai.BucketSubagent:
				agent = c.caller[len("subagent:"):]
			}
			want.add(agent, c)
		}
		require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, buildTrace(byte(i+1), calls)))
		// each batch reaches Prometheus before the next is sent: the second check proves
		// the exported counter is cumulative (docs/metrics.md), not the latest delta
		prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(want.total), 30*time.Second)
	}

	byCaller, err := prom.QueryByLabel(ctx, `sum by (caller) (agentmeter_tokens_total)`, "caller")
	require.NoError(t, err)
	assert.Equal(t, asFloats(want.byCaller), dropZeros(byCaller), "per caller bucket")
	byType, err := prom.QueryByLabel(ctx, `sum by (token_type) (agentmeter_tokens_total)`, "token_type")
	require.NoError(t, err)
	assert.Equal(t, asFloats(want.byType), dropZeros(byType), "per token type")
	byAgent, err := prom.QueryByLabel(ctx, `sum by (agent) (agentmeter_tokens_total)`, "agent")
	require.NoError(t, err)
	assert.Equal(t, asFloats(want.byAgent), dropZeros(byAgent), "per agent")
	byModel, err := prom.QueryByLabel(ctx, `sum by (model) (agentmeter_tokens_total)`, "model")
	require.NoError(t, err)
	assert.Equal(t, asFloats(want.byModel), dropZeros(byModel), "per model")

	// labels: exactly the contract's, never an id; job is the agent's service.name
	samples, err := prom.Query(ctx, `agentmeter_tokens_total`)
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	for _, s := range samples {
		for k := range s.Labels {
			assert.Contains(t, []string{"__name__", "job", "instance", "token_type", "caller", "agent", "model", "provider"}, k)
		}
		assert.Equal(t, "synthetic-agent", s.Labels["job"])
	}

	// the semconv histogram: sums per gen_ai.token.type equal input/output, one
	// observation per call that reported usage
	histSum, err := prom.QueryByLabel(ctx, `sum by (gen_ai_token_type) (gen_ai_client_token_usage_sum)`, "gen_ai_token_type")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"input": float64(want.byType["input"]), "output": float64(want.byType["output"])}, histSum)
	histCount, err := prom.QueryByLabel(ctx, `sum by (gen_ai_token_type) (gen_ai_client_token_usage_count)`, "gen_ai_token_type")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"input": float64(want.calls), "output": float64(want.calls)}, histCount)
	// semconv bucket boundaries: a 1200-token input lands in le=4096, not below 1024
	le, err := prom.Query(ctx, `sum(gen_ai_client_token_usage_bucket{gen_ai_token_type="input",le="1024"})`)
	require.NoError(t, err)
	require.Len(t, le, 1)
	assert.Equal(t, float64(4), le[0].Value, "inputs <= 1024 tokens: 640, 150, 10, 77")

	// subagentmerge did merge: the dispatching call carries the subagents' usage, and
	// still only its own usage was counted above
	var dispatching []ptrace.Span
	for _, sp := range WaitForSpans(t, tracesFile, 14, 30*time.Second) {
		// the metrics path labels its own copy: exported spans never carry its keys
		for _, k := range []string{"caller", "agent", "model", "provider", "token_type"} {
			_, has := sp.Attributes().Get(k)
			assert.False(t, has, "exported span %s carries the metrics label %q", sp.Name(), k)
		}
		if len(genai.StringsFromMap(sp.Attributes(), genai.AttrResponseToolCallIDs)) > 0 {
			dispatching = append(dispatching, sp)
		}
	}
	require.Len(t, dispatching, 1)
	merged, ok := genai.SubagentUsageFromMap(dispatching[0].Attributes())
	require.True(t, ok, "subagentmerge wrote agentmeter.subagent.* on the dispatching call")
	assert.Equal(t, genai.Usage{Input: 3640, Output: 710, CacheCreation: 2048, Reasoning: 64}, merged)

	// every query of the Grafana dashboard is valid PromQL over these series
	for _, expr := range dashboardQueries(t) {
		_, err := prom.Query(ctx, expr)
		assert.NoError(t, err, "dashboard query %s", expr)
	}
}

// dashboardQueries reads deploy/grafana-dashboard.json's PromQL with Grafana's variables
// replaced by values Prometheus accepts.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "grafana-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	r := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$job", ".*")
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	require.GreaterOrEqual(t, len(out), 10)
	return out
}

// The deployment configs in deploy/ are valid for our distribution.
func TestDeployCollectorConfigsValidate(t *testing.T) {
	setSidecarEnv(t)
	bin := CollectorBinary(t)
	for _, f := range []string{"tier1-loadbalancer.yaml"} {
		out, err := exec.Command(bin, "validate", "--config", filepath.Join(RepoRoot(), "deploy", f)).CombinedOutput()
		assert.NoError(t, err, "validate deploy/%s:\n%s", f, out)
	}
	// make demo's overlay (a file exporter appended to the traces pipeline)
	t.Setenv("AGENTMETER_DEMO_TRACES_FILE", filepath.Join(t.TempDir(), "traces.jsonl"))
	out, err := exec.Command(bin, "validate", "--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
		"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
		"--feature-gates=confmap.enableMergeAppendOption").CombinedOutput()
	assert.NoError(t, err, "validate the demo overlay:\n%s", out)
}

// The vendor exporters in the shipped config follow DeerFlow's switches: off by default,
// on through any of DeerFlow's variables, and an enabled exporter without credentials
// stops the collector at start with DeerFlow's message.
func TestSidecarConfigVendorSwitches(t *testing.T) {
	bin := CollectorBinary(t)
	cfg := filepath.Join(RepoRoot(), "otelcol-config.yaml")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"all off", nil, ""},
		{"langsmith on without key", map[string]string{"LANGSMITH_TRACING": "true"},
			"LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set."},
		{"langsmith on through LANGCHAIN_TRACING_V2", map[string]string{"LANGSMITH_TRACING": "", "LANGCHAIN_TRACING_V2": "yes"},
			"LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set."},
		{"langsmith on with key", map[string]string{"LANGSMITH_TRACING": "On", "LANGCHAIN_API_KEY": "lsv2-key"}, ""},
		{"langfuse on without keys", map[string]string{"LANGFUSE_TRACING": "1"},
			"Langfuse tracing is enabled but required settings are missing: LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY"},
		{"langfuse on without secret", map[string]string{"LANGFUSE_TRACING": "true", "LANGFUSE_PUBLIC_KEY": "pk-lf-1"},
			"Langfuse tracing is enabled but required settings are missing: LANGFUSE_SECRET_KEY"},
		{"langfuse on with keys", map[string]string{"LANGFUSE_TRACING": "true", "LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": "sk-lf-1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setSidecarEnv(t)
			for _, k := range []string{"LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING",
				"LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, err := exec.Command(bin, "validate", "--config", cfg).CombinedOutput()
			if tc.wantErr == "" {
				assert.NoError(t, err, "%s", out)
				return
			}
			assert.Error(t, err)
			assert.Contains(t, string(out), tc.wantErr)
			assert.NotContains(t, string(out), "sk-lf-1", "secrets never in errors")
		})
	}
}

// Usage records posted to the agentusage receiver of the shipped config are merged and
// counted like the runtime's spans: Prometheus shows them per caller, and the lead call
// that dispatched the subagent carries its merged usage.
func TestSidecarAgentUsageRecordsCounted(t *testing.T) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)

	body := `{"records": [
	  {"run_id": "run-au-1", "source_run_id": "llm-1", "caller": "lead_agent", "model_name": "gpt-4o", "provider": "openai",
	   "input_tokens": 900, "output_tokens": 100, "cache_read_tokens": 512, "response_tool_call_ids": ["call_au_1"]},
	  {"run_id": "run-au-1", "source_run_id": "llm-2", "caller": "subagent:researcher", "model_name": "gpt-4o-mini", "provider": "openai",
	   "input_tokens": 300, "output_tokens": 40, "reasoning_tokens": 10, "tool_call_id": "call_au_1"},
	  {"run_id": "run-au-1", "source_run_id": "llm-3", "caller": "middleware:title", "model_name": "gpt-4o-mini", "provider": "openai",
	   "input_tokens": 50, "output_tokens": 8}
	]}`
	var (
		status int
		answer []byte
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Post("http://"+ports.AgentUsage+"/v1/usage", "application/json", strings.NewReader(body))
		if err == nil {
			status = resp.StatusCode
			answer, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "agentusage never answered: %v", err) // may still be binding
	}
	require.Equal(t, http.StatusOK, status, "%s", answer)

	prom.WaitForValue(t, `sum(agentmeter_tokens_total{token_type=~"input|output"})`, 1398, 30*time.Second)
	prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, 1398+512+10, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byCaller, err := prom.QueryByLabel(ctx, `sum by (caller) (agentmeter_tokens_total{token_type=~"input|output"})`, "caller")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"lead_agent": 1000, "subagent": 340, "middleware": 58}, byCaller)
	byAgent, err := prom.QueryByLabel(ctx, `sum by (agent) (agentmeter_tokens_total{token_type=~"input|output"})`, "agent")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"lead_agent": 1058, "researcher": 340}, byAgent)

	var merged genai.Usage
	require.Eventually(t, func() bool {
		tds, _ := ReadTraces(tracesFile)
		for _, sp := range Spans(tds) {
			if u, ok := genai.SubagentUsageFromMap(sp.Attributes()); ok {
				merged = u
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no dispatching call was merged")
	assert.Equal(t, genai.Usage{Input: 300, Output: 40, Reasoning: 10}, merged)
}
