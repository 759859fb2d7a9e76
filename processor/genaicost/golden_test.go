package genaicost

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/<case>/{input,expected}.yaml (input from genainormalize's golden output)")

// goldenCostCases are the traces genaicost gets in the shipped pipeline: each library's
// trace as genainormalize leaves it (its golden output, copied into input.yaml by
// -update), and how many model calls in it the built-in table prices (a known model,
// its usage), counted by hand. None carries a cost of its own, so every priced call is
// priced from the table.
var goldenCostCases = []struct {
	name   string
	priced int
}{
	{"semconv_v141", 2},
	{"semconv_legacy", 1},
	{"openllmetry", 3},
	{"openinference", 2},
	{"ai_sdk_legacy", 2},
	{"ai_sdk_otel", 1},
	{"langchain", 1},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCostCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", tc.name)
			normalised, err := golden.ReadTraces(filepath.Join("..", "genainormalize", "testdata", tc.name, "expected.yaml"))
			require.NoError(t, err)
			if *update {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, golden.WriteTracesToFile(filepath.Join(dir, "input.yaml"), normalised))
			}
			in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(normalised, in), "genainormalize's golden output and input.yaml disagree: run with -update")
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

			// genaicost adds its keys (agentmeter.cost.*) and changes nothing else
			stripped := ptrace.NewTraces()
			out.CopyTo(stripped)
			for sp := range spaniter.All(stripped) {
				sp.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, "agentmeter.cost.") })
			}
			require.NoError(t, ptracetest.CompareTraces(in, stripped), "genaicost changed more than its cost keys")

			priced := 0
			for sp := range spaniter.All(out) {
				c, source, ok := genai.CostFromMap(sp.Attributes())
				if !ok {
					continue
				}
				priced++
				assert.True(t, genai.IsModelCallSpan(sp.Name(), sp.Attributes()), "%s: only model calls are priced", sp.Name())
				assert.Equal(t, genai.CostSourceTable, source, "%s: priced from the table", sp.Name())
				assert.Positive(t, c.Total, "%s: a priced call costs something", sp.Name())
				assert.InDelta(t, c.Total, c.PartsSum(), 1e-12, "%s: the cost's parts add up to its total", sp.Name())
			}
			assert.Equal(t, tc.priced, priced, "model calls priced")
		})
	}
}
