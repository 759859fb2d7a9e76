package genaicost

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/<case>/{input,expected}.yaml (input from genainormalize's golden output)")

// goldenCostCases are the traces genaicost gets in the shipped pipeline: each library's
// trace as genainormalize leaves it (its golden output, copied into input.yaml by
// -update), and the model calls a reader can count by hand in it: those the built-in
// table prices (a known model, its usage) and those that carry a cost already.
var goldenCostCases = []struct {
	name            string
	table, provider int
}{
	{"semconv_v141", 2, 0},
	{"semconv_legacy", 1, 0},
	{"openllmetry", 3, 0},
	{"openinference", 2, 0},
	{"ai_sdk_legacy", 2, 0},
	{"ai_sdk_otel", 1, 0},
	{"langchain", 1, 0},
}

// costKeys are every attribute genaicost writes.
var costKeys = []string{
	genai.AttrCostTotal, genai.AttrCostInput, genai.AttrCostCacheRead, genai.AttrCostCacheCreat,
	genai.AttrCostOutput, genai.AttrCostReasoning, genai.AttrCostSource, genai.AttrCostPrice,
	genai.AttrCostCacheSavings,
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCostCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", tc.name)
			if *update {
				normalised, err := golden.ReadTraces(filepath.Join("..", "genainormalize", "testdata", tc.name, "expected.yaml"))
				require.NoError(t, err)
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "input.yaml"), normalised))
			}
			in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			tp := newTestProc(t, createDefaultConfig())
			out := ptrace.NewTraces()
			in.CopyTo(out)
			require.NoError(t, tp.p.ConsumeTraces(context.Background(), out))
			if *update {
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "expected.yaml"), out))
			}
			want, err := golden.ReadTraces(filepath.Join(dir, "expected.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(want, out))

			// genaicost adds its keys and changes nothing else
			stripped := ptrace.NewTraces()
			out.CopyTo(stripped)
			for sp := range spaniter.All(stripped) {
				for _, k := range costKeys {
					sp.Attributes().Remove(k)
				}
			}
			require.NoError(t, ptracetest.CompareTraces(in, stripped), "genaicost changed more than its cost keys")

			var table, provider int
			for sp := range spaniter.All(out) {
				c, source, priced := genai.CostFromMap(sp.Attributes())
				if !priced {
					continue
				}
				assert.True(t, genai.IsModelCallSpan(sp.Name(), sp.Attributes()), "%s: only model calls are priced", sp.Name())
				switch source {
				case genai.CostSourceTable:
					table++
					assert.Positive(t, c.Total, "%s: a priced call costs something", sp.Name())
					assert.InDelta(t, c.Total, c.PartsSum(), 1e-12, "%s: a table cost's parts add up to its total", sp.Name())
				case genai.CostSourceProvider:
					provider++
				}
			}
			assert.Equal(t, tc.table, table, "model calls priced from the table")
			assert.Equal(t, tc.provider, provider, "model calls with the provider's cost")
		})
	}
}
