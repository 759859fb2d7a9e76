package subagentmerge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// An arrival order is a list of steps: batches to send, then a pause (subtrees delayed
// past the settle time, as when subagents run in other processes and flush later).
type arrivalStep struct {
	batches []ptrace.Traces
	pause   time.Duration
}

type arrivalOrder struct {
	name  string
	steps func(r *rand.Rand, td ptrace.Traces, settle time.Duration) []arrivalStep
}

var arrivalOrders = []arrivalOrder{
	{"root last", func(r *rand.Rand, td ptrace.Traces, _ time.Duration) []arrivalStep {
		return []arrivalStep{{batches: shuffleIntoBatches(r, td, 1+r.IntN(5))}}
	}},
	{"root first", func(r *rand.Rand, td ptrace.Traces, _ time.Duration) []arrivalStep {
		items := flatSpans(td)
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		var roots, rest []arrivalSpan
		for _, it := range items {
			if isLocalRoot(it.sp) {
				roots = append(roots, it)
			} else {
				rest = append(rest, it)
			}
		}
		return []arrivalStep{{batches: append([]ptrace.Traces{batchOf(roots)}, split(rest, 1+r.IntN(4))...)}}
	}},
	{"shuffled", func(r *rand.Rand, td ptrace.Traces, _ time.Duration) []arrivalStep {
		items := flatSpans(td)
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		return []arrivalStep{{batches: split(items, 1+r.IntN(6))}}
	}},
	{"shuffled and duplicated", func(r *rand.Rand, td ptrace.Traces, _ time.Duration) []arrivalStep {
		items := flatSpans(td)
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		var out []ptrace.Traces
		for _, b := range split(items, 1+r.IntN(5)) {
			out = append(out, b)
			if r.IntN(2) == 0 {
				out = append(out, clone(b)) // a client retry
			}
		}
		return []arrivalStep{{batches: out}}
	}},
	{"subtrees delayed past the settle time", func(r *rand.Rand, td ptrace.Traces, settle time.Duration) []arrivalStep {
		items := flatSpans(td)
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		var lead, subs []arrivalSpan
		for _, it := range items {
			if underTask(items, it.sp) {
				subs = append(subs, it)
			} else {
				lead = append(lead, it)
			}
		}
		return []arrivalStep{
			{batches: split(lead, 1+r.IntN(3)), pause: 3 * settle},
			{batches: split(subs, 1+r.IntN(3))},
		}
	}},
}

// replay sends each step's batches to c, then waits out the step's pause.
func replay(t *testing.T, c consumer.Traces, steps []arrivalStep) {
	t.Helper()
	for _, st := range steps {
		for _, b := range st.batches {
			require.NoError(t, c.ConsumeTraces(context.Background(), b))
		}
		time.Sleep(st.pause)
	}
}

// requireTasksMerged checks that every task span, in the version a sink keeps, ends
// marked merged.
func requireTasksMerged(t *testing.T, last map[pcommon.SpanID]ptrace.Span, msg string) {
	t.Helper()
	for id, sp := range last {
		if name, _ := sp.Attributes().Get(genai.AttrToolName); name.Str() == genai.TaskToolName {
			st, _ := sp.Attributes().Get(genai.AttrMergeStatus)
			require.Equal(t, genai.MergeMerged, st.Str(), "%s: task span %s ends merged", msg, id)
		}
	}
}

// upserted folds a processor's output the way a vendor that upserts by span id does
// (LangSmith, Langfuse): the last version of each span wins. counted is what the token
// metrics count: one version of every span (genai.IsCountedVersion).
func upserted(tds []ptrace.Traces) (last map[pcommon.SpanID]ptrace.Span, counted []ptrace.Span) {
	last = map[pcommon.SpanID]ptrace.Span{}
	for _, td := range tds {
		for _, sp := range appendSpans(nil, td) {
			last[sp.SpanID()] = sp
			if genai.IsCountedVersion(sp.Attributes()) {
				counted = append(counted, sp)
			}
		}
	}
	return last, counted
}

// Random agent trees × every arrival order: own usage unchanged and counted once, and,
// once every span has arrived, each dispatching span's merged usage (its last version, as
// a vendor keeps it) equal to the own usage under its task calls.
func TestPropertyEveryArrivalOrder(t *testing.T) {
	const settle = 15 * time.Millisecond
	for oi, order := range arrivalOrders {
		t.Run(order.name, func(t *testing.T) {
			t.Parallel()
			var corrections, released int64
			for seed := uint64(1); seed <= 40; seed++ {
				r := rand.New(rand.NewPCG(seed, uint64(oi)))
				in, want := randomAgentTraceWithWant(r, seed, seed%3 != 0)
				cfg := bufferModes[seed%uint64(len(bufferModes))].cfg()
				cfg.SettleTime, cfg.WaitDuration = settle, time.Minute
				p, sink, tel := newTestProcessor(t, cfg)
				replay(t, p, order.steps(r, clone(in), settle))
				require.NoError(t, p.Shutdown(context.Background()))
				corrections += countedSoFar(t, tel, "otelcol_processor_subagentmerge_corrections")
				released += countedSoFar(t, tel, "otelcol_processor_subagentmerge_traces_released")
				msg := fmt.Sprintf("%s seed %d", order.name, seed)
				assertExactAtSink(t, sink.AllTraces(), want, msg)
				last, counted := upserted(sink.AllTraces())
				require.Len(t, counted, in.SpanCount(), "%s: every span once, duplicates dropped", msg)
				var got genai.Usage
				for _, sp := range counted {
					u, _ := genai.UsageFromMap(sp.Attributes())
					got = got.Add(u)
				}
				require.Equal(t, ownUsageSum(in), got, "%s: own usage counted once", msg)
				requireTasksMerged(t, last, msg)
			}
			t.Logf("%s: %d corrections over 40 runs (%d releases)", order.name, corrections, released)
		})
	}
}
