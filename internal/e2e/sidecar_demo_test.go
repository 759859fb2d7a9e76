//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// runDemoAgent runs the built-in offline demo, exporting to otlpHTTP.
func runDemoAgent(t *testing.T, otlpHTTP string) runJSON {
	t.Helper()
	var res runJSON
	RunAgentJSON(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlpHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, &res,
		"Research metering approaches and compare them.")
	require.NotEmpty(t, res.TraceID, "run --json names its trace")
	require.Positive(t, res.Completion.TotalTokens)
	return res
}

// spanUsage sums own usage over the exported spans of the given traces, per caller bucket
// too (input+output), and counts calls.
type spanUsage struct {
	usage    genai.Usage
	byCaller map[string]int64
	calls    int64
	merged   int // dispatching calls carrying agentmeter.subagent.*
}

func sumSpans(path string, traceIDs map[string]bool) spanUsage {
	su := spanUsage{byCaller: map[string]int64{}}
	tds, _ := ReadTraces(path) // a partial last line is read again on the next poll
	seen := map[string]bool{}
	for _, sp := range Spans(tds) {
		tid := sp.TraceID().String()
		if !traceIDs[tid] || seen[tid+sp.SpanID().String()] {
			continue
		}
		seen[tid+sp.SpanID().String()] = true
		if _, ok := genai.SubagentUsageFromMap(sp.Attributes()); ok {
			su.merged++
		}
		u, ok := genai.UsageFromMap(sp.Attributes())
		if !ok {
			continue
		}
		caller := ""
		if v, ok := sp.Attributes().Get(genai.AttrCaller); ok {
			caller = v.Str()
		}
		su.usage = su.usage.Add(u)
		su.byCaller[genai.CallerBucket(caller)] += u.Total()
		su.calls++
	}
	return su
}

// uuidOf formats a 32-hex-digit trace id the way LangSmith ids are written.
func uuidOf(hexID string) string {
	if len(hexID) != 32 {
		return hexID
	}
	return hexID[:8] + "-" + hexID[8:12] + "-" + hexID[12:16] + "-" + hexID[16:20] + "-" + hexID[20:]
}

func allKinds(u genai.Usage) int64 {
	var n int64
	for _, k := range u.Kinds() {
		n += k.Tokens
	}
	return n
}

// The scripted demo, run several times through the shipped otelcol-config.yaml while a
// real Prometheus scrapes it: PromQL totals equal the exported spans' own usage, and the
// per-caller split equals the journals'. With the vendor exporters switched on by their
// DeerFlow variables against local fakes, the vendor-side totals are equal too.
func TestSidecarDemoRunsInPrometheus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vendors bool
	}{{"exporters_off", false}, {"langsmith_and_langfuse_on", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ports := setSidecarEnv(t)
			var (
				lf *langfusefake.Server
				ls *fakevendor.LangSmith
			)
			if tc.vendors {
				lf = langfusefake.New(t)
				t.Setenv("LANGFUSE_TRACING", "true")
				t.Setenv("LANGFUSE_PUBLIC_KEY", lf.PublicKey)
				t.Setenv("LANGFUSE_SECRET_KEY", lf.SecretKey)
				t.Setenv("LANGFUSE_BASE_URL", lf.URL)
				ls = fakevendor.NewLangSmith("lsv2-e2e-key")
				t.Cleanup(ls.Close)
				t.Setenv("LANGSMITH_TRACING", "true")
				t.Setenv("LANGSMITH_API_KEY", ls.APIKey)
				t.Setenv("LANGSMITH_ENDPOINT", ls.URL)
				t.Setenv("LANGSMITH_PROJECT", "agentmeter-e2e")
			}
			tracesFile := startShippedWithFile(t, ports)
			prom := scrapeShipped(t, ports.Prometheus)

			const runs = 3
			traceIDs := map[string]bool{}
			var journalTotal, journalIn, journalOut int64
			journalByCaller := map[string]int64{}
			for i := 0; i < runs; i++ {
				res := runDemoAgent(t, ports.OTLPHTTP)
				traceIDs[strings.ToLower(res.TraceID)] = true
				c := res.Completion
				journalTotal += c.TotalTokens
				journalIn += c.TotalInputTokens
				journalOut += c.TotalOutputTokens
				journalByCaller[genai.BucketLeadAgent] += c.LeadAgentTokens
				journalByCaller[genai.BucketSubagent] += c.SubagentTokens
				journalByCaller[genai.BucketMiddleware] += c.MiddlewareTokens
			}
			require.Len(t, traceIDs, runs, "one trace per run")

			// the exported spans (after subagentmerge): own usage adds up to the journals
			var su spanUsage
			require.Eventually(t, func() bool {
				su = sumSpans(tracesFile, traceIDs)
				return su.usage.Total() == journalTotal && su.merged == runs
			}, 30*time.Second, 200*time.Millisecond, "exported spans never added up to the journals' %d tokens with one merged dispatching call per run", journalTotal)
			assert.Equal(t, journalIn, su.usage.Input)
			assert.Equal(t, journalOut, su.usage.Output)
			assert.Equal(t, journalByCaller, su.byCaller, "spans per caller vs journals")

			// Prometheus: the counter equals the spans' own usage, per caller equals the journals
			prom.WaitForValue(t, `sum(agentmeter_tokens_total{token_type=~"input|output"})`, float64(journalTotal), 30*time.Second)
			prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(allKinds(su.usage)), 30*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			byCaller, err := prom.QueryByLabel(ctx, `sum by (caller) (agentmeter_tokens_total{token_type=~"input|output"})`, "caller")
			require.NoError(t, err)
			want := map[string]float64{}
			for k, v := range journalByCaller {
				if v != 0 {
					want[k] = float64(v)
				}
			}
			assert.Equal(t, want, dropZeros(byCaller), "prometheus per caller vs journals")

			if !tc.vendors {
				return
			}
			// Langfuse: the usage it received, summed per trace as Langfuse sums a trace
			require.Eventually(t, func() bool {
				var total int64
				for tid, n := range langfusefake.TraceUsage(lf.Observations()) {
					if traceIDs[tid] {
						total += n
					}
				}
				return total == journalTotal
			}, 30*time.Second, 200*time.Millisecond, "langfuse-side usage never reached %d", journalTotal)
			assert.Empty(t, lf.Problems(), "langfuse protocol problems")

			// LangSmith: outputs.usage_metadata.total_tokens of the runs it received
			wantRoots := map[string]bool{}
			for tid := range traceIDs {
				wantRoots[uuidOf(tid)] = true
			}
			var lsTotal int64
			require.Eventually(t, func() bool {
				lsTotal = 0
				for _, run := range ls.Runs() {
					if tid, _ := run["trace_id"].(string); !wantRoots[tid] {
						continue
					}
					outputs, _ := run["outputs"].(map[string]any)
					um, _ := outputs["usage_metadata"].(map[string]any)
					if n, ok := um["total_tokens"].(float64); ok {
						lsTotal += int64(n)
					}
				}
				return lsTotal == journalTotal
			}, 30*time.Second, 200*time.Millisecond, "langsmith-side usage never reached %d (last %d)", journalTotal, lsTotal)
			assert.Empty(t, ls.Violations(), "langsmith protocol violations")
		})
	}
}

// `make demo`'s driver, end to end on free ports: it exits 0 only when the journal, the
// exported spans and the Prometheus endpoint agree, and prints the answer, the call table
// with the merged subagent usage and the counter lines.
func TestMakeDemoReport(t *testing.T) {
	setSidecarEnv(t)
	report := filepath.Join(t.TempDir(), "demoreport")
	build := exec.Command("go", "build", "-o", report, "./cmd/demoreport")
	build.Dir = RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/demoreport:\n%s", out)

	cmd := exec.Command(report, "-collector", CollectorBinary(t), "-agentmeter", AgentmeterBinary(t),
		"-config", filepath.Join(RepoRoot(), "otelcol-config.yaml"), "-runs", "2")
	cmd.Dir = RepoRoot()
	start := time.Now()
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "demoreport:\n%s", out)
	text := string(out)
	t.Logf("demo took %s", time.Since(start))
	assert.Contains(t, text, "OK: journal, spans and Prometheus agree on tokens and cost")
	assert.Equal(t, 2, strings.Count(text, "\nanswer: "), "one answer per run")
	assert.Regexp(t, `(?m)^#\s+caller\s+model\s+step\s+input\s+output`, text)
	// the dispatching call of each run shows its cost, the merged subagent usage and its dispatches
	assert.Regexp(t, `(?m)^\d+\s+lead_agent\s+\S+\s+\S+(\s+\d+){5}\s+\d+\.\d{6}\s+\d+\s+\d+\s+\d+\s+\d+\s*$`, text)
	assert.Contains(t, text, `agentmeter_tokens_total{`)
	assert.Contains(t, text, `agentmeter_cost_usd_total{`)
	// the demo prices: cost per caller and in total, three ways
	for _, who := range []string{"journal:   ", "spans:     ", "prometheus:"} {
		assert.Regexp(t, `(?m)^`+who+` total 0\.0360\d+ \(lead_agent 0\.0289\d+, subagent 0\.0058\d+, middleware 0\.0012\d+\)$`, text)
	}
	assert.Contains(t, text, "collector stopped")
}

// docs/deploy.md's two-tier topology, for real: the agent sends to a tier-1 collector
// running deploy/tier1-loadbalancer.yaml (its DNS resolver swapped for a static list of
// the two tier-2 addresses), which routes by trace id to two tier-2 collectors running the
// shipped otelcol-config.yaml. Every trace lands whole on one tier-2 collector (so each
// run's dispatching call is merged), and Prometheus summing over both tier-2 collectors
// equals the journals.
func TestTwoTierTopologyCountsOnce(t *testing.T) {
	type tier2 struct {
		ports  sidecarPorts
		traces string
	}
	var backends []tier2
	for i := 0; i < 2; i++ {
		ports := setSidecarEnv(t) // the env each collector inherits at its start
		backends = append(backends, tier2{ports, startShippedWithFile(t, ports)})
	}

	// tier 1
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "tier1-loadbalancer.yaml"))
	require.NoError(t, err)
	dnsBlock := regexp.MustCompile(`(?m)^      dns:\n(^        .*\n)+`)
	require.Regexp(t, dnsBlock, string(raw), "tier-1 config has no dns resolver block to swap")
	static := fmt.Sprintf("      static:\n        hostnames: [%q, %q]\n", backends[0].ports.OTLPGRPC, backends[1].ports.OTLPGRPC)
	tier1Cfg := dnsBlock.ReplaceAllLiteralString(string(raw), static)
	tier1 := setSidecarEnv(t)
	StartIn(t, t.TempDir(), tier1Cfg, tier1.OTLPHTTP)

	prom := scrapeShipped(t, backends[0].ports.Prometheus, backends[1].ports.Prometheus)

	const runs = 6
	traceIDs := map[string]bool{}
	var journalTotal int64
	journalByCaller := map[string]float64{}
	for i := 0; i < runs; i++ {
		res := runDemoAgent(t, tier1.OTLPHTTP)
		traceIDs[strings.ToLower(res.TraceID)] = true
		journalTotal += res.Completion.TotalTokens
		journalByCaller[genai.BucketLeadAgent] += float64(res.Completion.LeadAgentTokens)
		journalByCaller[genai.BucketSubagent] += float64(res.Completion.SubagentTokens)
		journalByCaller[genai.BucketMiddleware] += float64(res.Completion.MiddlewareTokens)
	}

	// each trace whole on one backend, merged there
	var a, b spanUsage
	require.Eventually(t, func() bool {
		a, b = sumSpans(backends[0].traces, traceIDs), sumSpans(backends[1].traces, traceIDs)
		return a.usage.Total()+b.usage.Total() == journalTotal && a.merged+b.merged == runs
	}, 30*time.Second, 200*time.Millisecond, "tier-2 spans never added up to %d tokens with %d merges", journalTotal, runs)
	t.Logf("tier-2 split: %d and %d merged runs", a.merged, b.merged)
	seen := map[string]int{} // trace id -> index of the backend that has it
	for i, be := range backends {
		tds, err := ReadTraces(be.traces)
		require.NoError(t, err)
		for _, sp := range Spans(tds) {
			tid := sp.TraceID().String()
			if j, ok := seen[tid]; ok && j != i {
				t.Fatalf("trace %s split across tier-2 collectors", tid)
			}
			seen[tid] = i
		}
	}

	prom.WaitForValue(t, `sum(agentmeter_tokens_total{token_type=~"input|output"})`, float64(journalTotal), 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byCaller, err := prom.QueryByLabel(ctx, `sum by (caller) (agentmeter_tokens_total{token_type=~"input|output"})`, "caller")
	require.NoError(t, err)
	assert.Equal(t, dropZeros(journalByCaller), dropZeros(byCaller))
}
