package genainormalize

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/processor/subagentmerge"
)

// The fake OpenAI server of test/interop served, to every library, a two-agent run: the
// lead (gpt-4o) asks for a `task` tool call, the task runs a subagent "researcher"
// (gpt-4o-mini, one call), the lead answers.
var (
	servedLead1 = genai.Usage{Input: 114, Output: 13, CacheRead: 32, Reasoning: 3}
	servedSub   = genai.Usage{Input: 214, Output: 23, CacheRead: 64, Reasoning: 5}
	servedLead2 = genai.Usage{Input: 328, Output: 33, CacheRead: 96, Reasoning: 7}
)

// capturedCase is one library's real spans (testdata/captured/<lib>.otlp.json, copied
// from test/interop/testdata) and what reaches the counters after genainormalize and
// subagentmerge: usage per caller bucket, what was merged onto the dispatching call and
// the dispatching tool span's merge status. Where a count differs from what was served,
// the library did not pass it on (see docs/genainormalize.md, Limits).
type capturedCase struct {
	lib      string
	lead     genai.Usage // own usage of calls that count for the lead
	subagent genai.Usage // own usage of calls attributed to subagent:researcher
	merged   genai.Usage // agentmeter.subagent.* on the dispatching call (zero: none)
	status   string      // agentmeter.merge.status of the task tool span
	subName  string      // the agent in the subagent calls' agentmeter.caller
}

var capturedCases = []capturedCase{
	// 0.27's OpenAI instrumentation writes no cache or reasoning counts, and for the
	// streamed subagent call it writes its own estimate (16/9) instead of the served usage.
	// The task span's call id is recovered from its recorded input (traceloop.entity.input).
	{"openllmetry",
		genai.Usage{Input: 442, Output: 46}, genai.Usage{Input: 16, Output: 9}, genai.Usage{Input: 16, Output: 9}, genai.MergeMerged, "researcher"},
	// OpenInference records no usage for streamed chat completions (the subagent's call):
	// the task is merged, with nothing to add.
	{"openinference",
		servedLead1.Add(servedLead2), genai.Usage{}, genai.Usage{}, genai.MergeMerged, "researcher"},
	// @ai-sdk/otel writes no reasoning count.
	{"aisdk-otel",
		noReasoning(servedLead1.Add(servedLead2)), noReasoning(servedSub), noReasoning(servedSub), genai.MergeMerged, "researcher"},
	{"aisdk-legacy",
		servedLead1.Add(servedLead2), servedSub, servedSub, genai.MergeMerged, "researcher"},
	// These two captures are the agentusage receiver's output: its LangSmith and Langfuse
	// faces built the contract spans; the normalisation leaves them as they are.
	{"langchain-langsmith",
		servedLead1.Add(servedLead2), servedSub, servedSub, genai.MergeMerged, "researcher"},
	{"langchain-langfuse",
		servedLead1.Add(servedLead2), servedSub, servedSub, genai.MergeMerged, "researcher"},
}

func noReasoning(u genai.Usage) genai.Usage { u.Reasoning = 0; return u }

func readCaptured(t *testing.T, lib string) ptrace.Traces {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "captured", lib+".otlp.json"))
	require.NoError(t, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(raw)
	require.NoError(t, err)
	return td
}

// TestGoldenCaptured compares the normalised output of each library's real spans with
// testdata/captured/<lib>.expected.yaml.
func TestGoldenCaptured(t *testing.T) {
	for _, tc := range capturedCases {
		t.Run(tc.lib, func(t *testing.T) {
			out := run(t, readCaptured(t, tc.lib))
			file := filepath.Join("testdata", "captured", tc.lib+".expected.yaml")
			if *update {
				require.NoError(t, golden.WriteTracesToFile(file, out))
			}
			want, err := golden.ReadTraces(file)
			require.NoError(t, err)
			require.NoError(t, ptracetest.CompareTraces(want, out))
		})
	}
}

// TestCapturedThroughMerge runs each library's spans through genainormalize and
// subagentmerge, as the shipped pipeline does, and checks what the token metrics count
// (own usage of model calls, by caller bucket), the merge and the split.
func TestCapturedThroughMerge(t *testing.T) {
	for _, tc := range capturedCases {
		t.Run(tc.lib, func(t *testing.T) {
			out := mergeAll(t, run(t, readCaptured(t, tc.lib)))
			var lead, sub, merged genai.Usage
			status, tools := "", 0
			for sp := range spaniter.All(out) {
				attrs := sp.Attributes()
				if genai.IsToolCallSpan(sp.Name(), attrs) && genai.StringAttr(attrs, genai.AttrToolName) == genai.TaskToolName {
					status, tools = genai.StringAttr(attrs, genai.AttrMergeStatus), tools+1
				}
				if u, ok := genai.SubagentUsageFromMap(attrs); ok {
					merged = merged.Add(u)
				}
				if !genai.IsModelCallSpan(sp.Name(), attrs) {
					continue
				}
				u, _ := genai.UsageFromMap(attrs)
				switch caller := genai.StringAttr(attrs, genai.AttrCaller); genai.CallerBucket(caller) {
				case genai.BucketSubagent:
					assert.Equal(t, genai.SubagentCaller(tc.subName), caller)
					sub = sub.Add(u)
				default:
					lead = lead.Add(u)
				}
			}
			assert.Equal(t, tc.lead, lead, "lead")
			assert.Equal(t, tc.subagent, sub, "subagent")
			assert.Equal(t, tc.merged, merged, "merged onto the dispatching call")
			assert.Equal(t, 1, tools, "one task tool span")
			assert.Equal(t, tc.status, status)
		})
	}
}

// mergeAll runs td through a subagentmerge processor and returns what it passed on.
func mergeAll(t *testing.T, td ptrace.Traces) ptrace.Traces {
	t.Helper()
	sink := new(consumertest.TracesSink)
	f := subagentmerge.NewFactory()
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.Shutdown(context.Background()))
	out := ptrace.NewTraces()
	for _, b := range sink.AllTraces() {
		b.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return out
}
