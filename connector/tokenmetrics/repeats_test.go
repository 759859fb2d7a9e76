package tokenmetrics

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/processor/subagentmerge"
)

// A batch handed over twice (its sender's retry after another consumer refused it) is
// counted once; the second time its calls are repeats, counted in the telemetry.
func TestRepeatedCallsCountedOnce(t *testing.T) {
	h := newHarness(t, nil)
	td := newTrace("agent").
		chat("gpt-4o", genai.Usage{Input: 100, Output: 10}, nil).
		chat("gpt-4o", genai.Usage{Input: 7, Output: 3}, map[string]any{genai.AttrCallerSettled: true, genai.AttrMergeRevision: int64(1)}).
		traces()
	h.send(td)
	h.send(td)
	assert.Equal(t, float64(120), total(t, latest(t, h.sink), mTokens, nil), "counted once")
	assert.Equal(t, int64(2), h.modelCalls("counted"))
	assert.Equal(t, int64(2), h.modelCalls("repeat"))
}

// At least the last remembered_calls calls are remembered, at most twice as many; a
// call handed over again is remembered afresh; with 0 nothing is remembered.
func TestRepeatsRememberTheLastCalls(t *testing.T) {
	u := genai.Usage{Input: 10, Output: 1}
	call := func() ptrace.Traces { return newTrace("agent").chat("m", u, nil).traces() }
	h := newHarness(t, func(c *Config) { c.RememberedCalls = 2 })
	a, b, c, d, e := call(), call(), call(), call(), call()
	for _, td := range []ptrace.Traces{a, b, c, d, e, a} {
		h.send(td)
	}
	assert.Equal(t, float64(66), total(t, latest(t, h.sink), mTokens, nil), "a, 4 calls later, was forgotten")
	assert.Zero(t, h.modelCalls("repeat"))

	again := newHarness(t, func(c *Config) { c.RememberedCalls = 2 })
	a, b, c, d, e = call(), call(), call(), call(), call()
	for _, td := range []ptrace.Traces{a, b, c, a, d, e, a} {
		again.send(td)
	}
	assert.Equal(t, float64(55), total(t, latest(t, again.sink), mTokens, nil), "a, handed over again, was remembered afresh")
	assert.Equal(t, int64(2), again.modelCalls("repeat"))

	off := newHarness(t, func(c *Config) { c.RememberedCalls = 0 })
	off.send(a)
	off.send(a)
	assert.Equal(t, float64(22), total(t, latest(t, off.sink), mTokens, nil), "remembered_calls 0 counts whatever comes")
}

// The shipped layout: the stream merge passes each batch to a fan-out of the Langfuse
// exporter and this connector. The exporter's full queue refuses a batch; the merge
// takes it back and the sender sends the request again. The connector had counted it
// with the refusal and counts nothing more with the retry, and the settled calls of a
// run whose callers the merge settles are counted once too, whatever was refused.
func TestRefusedBesideTheConnectorCountedOnce(t *testing.T) {
	h := newHarness(t, nil)
	r := rand.New(rand.NewPCG(5, 5))
	var want genai.Usage
	var runs []agentrun.Run
	for i := range 6 {
		run := agentrun.New(r, uint64(i+1))
		if i%2 == 1 {
			run = agentrun.Untraced(r, uint64(i+1))
		}
		runs = append(runs, run)
		for _, sp := range run.Spans {
			if u, ok := genai.UsageFromMap(sp.Attributes()); ok {
				want.Input, want.Output = want.Input+u.Input, want.Output+u.Output
			}
		}
	}
	refuse := 0
	fanout, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		require.NoError(t, h.c.ConsumeTraces(ctx, td)) // counts whatever it is given
		if refuse++; refuse%3 == 0 {
			return errors.New("sending queue is full") // the Langfuse exporter beside it
		}
		return nil
	})
	require.NoError(t, err)
	f := subagentmerge.NewFactory()
	merge, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), fanout)
	require.NoError(t, err)
	require.NoError(t, merge.Start(context.Background(), componenttest.NewNopHost()))
	// the runs' spans as they end, a few of each run a request, every refused request
	// sent again until taken
	for sent := true; sent; {
		sent = false
		td := ptrace.NewTraces()
		for i := range runs {
			run := &runs[i]
			if len(run.Spans) == 0 {
				continue
			}
			rs := td.ResourceSpans().AppendEmpty()
			run.Traces.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
			ss := rs.ScopeSpans().AppendEmpty()
			for k := 0; k < 3 && len(run.Spans) > 0; k++ {
				run.Spans[0].CopyTo(ss.Spans().AppendEmpty())
				run.Spans = run.Spans[1:]
			}
			sent = true
		}
		for sent {
			again := ptrace.NewTraces()
			td.CopyTo(again)
			if merge.ConsumeTraces(context.Background(), again) == nil {
				break
			}
		}
	}
	require.NoError(t, merge.Shutdown(context.Background()))
	pts := latest(t, h.sink)
	assert.Equal(t, float64(want.Input), total(t, pts, mTokens, map[string]any{"token_type": "input"}))
	assert.Equal(t, float64(want.Output), total(t, pts, mTokens, map[string]any{"token_type": "output"}))
	assert.Positive(t, h.modelCalls("repeat"), "no call came twice: the test says nothing")
}

// The tables against a model of the two generations in maps, over random calls and
// repeats, across the tables' growth and many generations: seen answers as the model.
func TestRepeatsAgainstAModel(t *testing.T) {
	for _, max := range []int{1, 3, 1000, 5000} {
		r := newRepeats(max)
		rng := rand.New(rand.NewPCG(uint64(max), 9))
		cur, prev := map[uint64]bool{}, map[uint64]bool{}
		for step := range 40_000 {
			var tid pcommon.TraceID
			var sid pcommon.SpanID
			// a few times max distinct calls, so repeats are frequent, some remembered
			// and some forgotten
			id := rng.Uint64N(uint64(3 * max))
			tid[0], tid[1], sid[0], sid[3] = byte(id), byte(id>>8), byte(id>>16), 1
			want := cur[id] || prev[id]
			if !cur[id] {
				if len(cur) == max {
					cur, prev = map[uint64]bool{}, cur
				}
				cur[id] = true
			}
			require.Equal(t, want, r.seen(tid, sid), "max %d, step %d", max, step)
			require.Equal(t, len(cur), r.cur.n, "max %d, step %d", max, step)
		}
	}
}

// BenchmarkRepeatsMemory is what remembering calls costs at the default
// remembered_calls: the heap both generations hold once full, per call remembered at
// least, and the time to count one more call new to them (two lookups and an insert
// into tables that do not fit in a cache; a new generation every remembered_calls).
func BenchmarkRepeatsMemory(b *testing.B) {
	n := createDefaultConfig().RememberedCalls
	ids := func(i uint64) (pcommon.TraceID, pcommon.SpanID) {
		var tid pcommon.TraceID
		var sid pcommon.SpanID
		tid[0], tid[8], sid[0], sid[7], sid[1] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24), 1
		return tid, sid
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newRepeats(n)
	for i := range uint64(2 * n) {
		r.seen(ids(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.seen(ids(uint64(2*n + i)))
	}
	b.ReportMetric(held, "heap-B/call") // after the loop: ResetTimer drops reported metrics
	runtime.KeepAlive(r)
}
