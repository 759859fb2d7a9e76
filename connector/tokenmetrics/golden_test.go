package tokenmetrics

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/<case>/{input,expected}.yaml (input from subagentmerge's golden output)")

// goldenMetricCases are the agent trees of subagentmerge's golden tests, as the merge
// passes them on (its golden outputs, copied into input.yaml by -update): dispatching
// calls that carry their subagents' merged usage beside their own, which must not count.
var goldenMetricCases = []string{
	"one_task", "parallel_tasks", "nested", "reused_call_id", "failed_subagent", "orphan", "output_messages_only",
}

func TestGolden(t *testing.T) {
	for _, name := range goldenMetricCases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", name)
			merged, err := golden.ReadTraces(filepath.Join("..", "..", "processor", "subagentmerge", "testdata", name, "expected.yaml"))
			require.NoError(t, err)
			if *update {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "input.yaml"), merged))
			}
			in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(merged, in), "subagentmerge's golden output and input.yaml disagree: run with -update")
			h := newHarness(t, func(c *Config) {
				c.Metrics = MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true}
			})
			h.send(in)
			got := h.sink.AllMetrics()
			require.Len(t, got, 1, "one batch, one emission")
			if *update {
				require.NoError(t, golden.WriteMetricsToFile(filepath.Join(dir, "expected.yaml"), got[0]))
			}
			want, err := golden.ReadMetrics(filepath.Join(dir, "expected.yaml"))
			require.NoError(t, err)
			// timestamps are the clock's (the connector's own tests check them); the golden
			// file holds pkg/golden's normalised ones
			require.NoError(t, pmetrictest.CompareMetrics(want, got[0],
				pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp(),
				pmetrictest.IgnoreResourceMetricsOrder(), pmetrictest.IgnoreScopeMetricsOrder(),
				pmetrictest.IgnoreMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder()))

			// what the sum of every counter must be, read by hand from the spans: the own
			// usage of each model call, once, whatever was merged onto it
			own := ownUsage(in)
			assert.Positive(t, own.Input, "the case has model calls")
			pts := latest(t, h.sink)
			assert.Equal(t, map[string]float64{
				"input": float64(own.Input), "output": float64(own.Output), "cache_read": float64(own.CacheRead),
				"cache_creation": float64(own.CacheCreation), "reasoning": float64(own.Reasoning),
			}, withZeros(by(pts, "agentmeter.tokens", "token_type"), "input", "output", "cache_read", "cache_creation", "reasoning"))
			assert.Equal(t, float64(own.Input), total(t, pts, "gen_ai.client.inference.usage.input_tokens", nil), "semconv input counter")
			assert.Equal(t, float64(own.Output), total(t, pts, "gen_ai.client.inference.usage.output_tokens", nil), "semconv output counter")
		})
	}
}

// ownUsage sums the own usage (gen_ai.usage.*) of the model calls of td, each counted
// by its one counted version.
func ownUsage(td ptrace.Traces) genai.Usage {
	var sum genai.Usage
	for sp := range spaniter.All(td) {
		attrs := sp.Attributes()
		if !genai.IsModelCallSpan(sp.Name(), attrs) || !genai.IsCountedVersion(attrs) {
			continue
		}
		if u, ok := genai.UsageFromMap(attrs); ok {
			sum = sum.Add(u)
		}
	}
	return sum
}

// withZeros is totals with each of keys present, 0 where no series had it.
func withZeros(totals map[string]float64, keys ...string) map[string]float64 {
	for _, k := range keys {
		totals[k] += 0
	}
	return totals
}
