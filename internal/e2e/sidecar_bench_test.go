//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// What the token-metrics path costs the sidecar: the shipped config (merge, batch, file
// exporter, and the tokenmetrics connector → prometheus path) against the same config
// with the token metrics cut out. Each op is
// one OTLP/HTTP request of 10 demo-shaped runs (14 spans each, 8 with usage), sent by 4
// workers; the clock stops when the file exporter has written every span.
//
//	AGENTMETER_COLLECTOR=$PWD/bin/agentmeter-collector go test -tags e2e ./internal/e2e -run '^$' -bench SidecarPipeline -benchtime 200x
func BenchmarkSidecarPipeline(b *testing.B) {
	for _, v := range []struct {
		name    string
		metrics bool
	}{{"with_token_metrics", true}, {"without_token_metrics", false}} {
		b.Run(v.name, func(b *testing.B) {
			ports := setSidecarEnv(b)
			dir := b.TempDir()
			t := filepath.Join(dir, "traces.jsonl")
			b.Setenv("AGENTMETER_DEMO_TRACES_FILE", t)
			cfg := filepath.Join(RepoRoot(), "otelcol-config.yaml")
			if !v.metrics {
				cfg = withoutTokenPipelines(b, dir)
			}
			StartWithArgs(b, dir, ports.OTLPHTTP, "--config", cfg,
				"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
				"--feature-gates=confmap.enableMergeAppendOption")

			const runsPerRequest = 10
			reqs := make([]ptrace.Traces, b.N)
			spansPerReq := 0
			for i := range reqs {
				td := ptrace.NewTraces()
				for r := 0; r < runsPerRequest; r++ {
					run := buildTrace(0, benchCalls)
					setTraceID(run, uint32(i*runsPerRequest+r))
					run.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
				}
				spansPerReq = td.SpanCount()
				reqs[i] = td
			}
			telemetry := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Telemetry)
			before := sentSpans(b, telemetry)

			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			work := make(chan ptrace.Traces)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for td := range work {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						if err := SendOTLPHTTP(ctx, ports.OTLPHTTP, td); err != nil {
							b.Error(err)
						}
						cancel()
					}
				}()
			}
			for _, td := range reqs {
				work <- td
			}
			close(work)
			wg.Wait()
			want := before + float64(b.N*spansPerReq)
			for deadline := time.Now().Add(2 * time.Minute); sentSpans(b, telemetry) < want; time.Sleep(20 * time.Millisecond) {
				require.True(b, time.Now().Before(deadline), "file exporter never wrote %v spans", want)
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*spansPerReq)/el.Seconds(), "spans/s")
		})
	}
}

// benchCalls is one demo-shaped run: lead calls (one dispatching), two subagent calls, a
// middleware call; with the invoke_agent/execute_tool spans it is 9 spans.
var benchCalls = func() []chatSpan {
	u := func(in, out, cr int64) *genai.Usage { return &genai.Usage{Input: in, Output: out, CacheRead: cr} }
	return []chatSpan{
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: u(1200, 96, 1024), dispatches: true},
		{caller: "middleware:title", model: "gpt-4o-mini", provider: "openai", usage: u(180, 6, 0)},
		{caller: "subagent:researcher", model: "gpt-4o-mini", provider: "openai", usage: u(640, 52, 0)},
		{caller: "subagent:researcher", model: "gpt-4o-mini", provider: "openai", usage: u(655, 61, 512)},
		{caller: "lead_agent", model: "gpt-4o", provider: "openai", usage: u(2110, 48, 1920)},
	}
}()

// setTraceID gives every span of td the trace id n (and keeps span ids unique per trace).
func setTraceID(td ptrace.Traces, n uint32) {
	var tid [16]byte
	binary.BigEndian.PutUint32(tid[:4], n)
	tid[15] = 0xbe
	for sp := range spaniter.All(td) {
		sp.SetTraceID(tid)
	}
}

// sentSpans reads otelcol_exporter_sent_spans of the file/demo exporter from the
// collector's own metrics.
func sentSpans(b *testing.B, url string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "otelcol_exporter_sent_spans") && strings.Contains(line, `exporter="file/demo"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				n += v
			}
		}
	}
	return n
}

// withoutTokenPipelines writes the shipped config minus the token-metrics pipelines.
func withoutTokenPipelines(b *testing.B, dir string) string {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "otelcol-config.yaml"))
	require.NoError(b, err)
	s := string(raw)
	cut := strings.Index(s, "    metrics:\n      receivers: [tokenmetrics]")
	require.Positive(b, cut, "shipped config layout changed")
	s = s[:cut]
	s = strings.Replace(s, "exporters: [langsmith, langfuse, tokenmetrics]", "exporters: [langsmith, langfuse]", 1)
	p := filepath.Join(dir, "no-metrics.yaml")
	require.NoError(b, os.WriteFile(p, []byte(s), 0o600))
	return p
}
