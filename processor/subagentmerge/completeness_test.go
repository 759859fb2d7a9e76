package subagentmerge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// only returns a copy of td with the spans keep accepts.
func only(td ptrace.Traces, keep func(ptrace.Span) bool) ptrace.Traces {
	c := clone(td)
	for i := 0; i < c.ResourceSpans().Len(); i++ {
		ss := c.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < ss.Len(); j++ {
			ss.At(j).Spans().RemoveIf(func(sp ptrace.Span) bool { return !keep(sp) })
		}
	}
	return c
}

func spanIDSet(td ptrace.Traces) map[pcommon.SpanID]bool {
	m := map[pcommon.SpanID]bool{}
	for sp := range spaniter.All(td) {
		m[sp.SpanID()] = true
	}
	return m
}

// The arrival orders, on the parallel fixture (10/5 + 20/7 → 30/12/42): root
// first, and root first with the subagents' spans later, are held until nothing named
// is missing, then merged exactly.
func TestCompleteOnlyWhenNothingNamedIsMissing(t *testing.T) {
	full := buildParallel()
	items := flatSpans(full)
	lead := only(full, func(sp ptrace.Span) bool { return !underTask(items, sp) })
	leadIDs := spanIDSet(lead)
	subs := only(full, func(sp ptrace.Span) bool { return !leadIDs[sp.SpanID()] })
	require.Positive(t, subs.SpanCount())

	for _, tc := range []struct {
		name    string
		batches []ptrace.Traces
	}{
		{"root first", []ptrace.Traces{only(full, isLocalRoot), only(full, func(sp ptrace.Span) bool { return !isLocalRoot(sp) })}},
		{"lead first, subagents later", []ptrace.Traces{lead, subs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, sink, tel := newTestProcessor(t, defaultTestConfig())
			defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
			require.NoError(t, p.ConsumeTraces(context.Background(), tc.batches[0]))
			time.Sleep(20 * time.Millisecond)
			assert.Zero(t, sink.SpanCount(), "held: what the trace names has not arrived")
			require.NoError(t, p.ConsumeTraces(context.Background(), tc.batches[1]))
			require.Equal(t, full.SpanCount(), sink.SpanCount())
			assert.Equal(t, int64(1), releasedBy(t, tel, "complete"))
			out := canonical(sink.AllTraces()...)
			assertSubagent(t, spanByCalls(t, out, "call_a", "call_b"), genai.Usage{Input: 30, Output: 12}, 2, "call_a", "call_b")
		})
	}
}

// A trace whose model calls announce nothing (no tool-call ids, output messages or
// finish reasons) is held settle_time after its root, then released as "settled".
func TestUnannouncedTraceSettles(t *testing.T) {
	b := newTraceBuilder(77)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(3, 4))
	cfg := defaultTestConfig()
	cfg.SettleTime = 40 * time.Millisecond
	p, sink, tel := newTestProcessor(t, cfg)
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	start := time.Now()
	require.NoError(t, p.ConsumeTraces(context.Background(), clone(b.td)))
	assert.Zero(t, sink.SpanCount())
	require.Eventually(t, func() bool { return sink.SpanCount() == 2 }, 5*time.Second, 2*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), cfg.SettleTime)
	assert.Equal(t, int64(1), releasedBy(t, tel, "settled"))

	// the same run with finish reasons says its answer is final: released at once
	b2 := newTraceBuilder(78)
	lead2 := b2.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	c := b2.chat(lead2, usage(3, 4))
	genai.PutStrings(c.Attributes(), genai.AttrFinishReasons, []string{"stop"})
	require.NoError(t, p.ConsumeTraces(context.Background(), clone(b2.td)))
	assert.Equal(t, 4, sink.SpanCount())
	assert.Equal(t, int64(1), releasedBy(t, tel, "complete"))
}

// num_traces is exact over all shards, and the least recently extended go first.
func TestNumTracesIsExact(t *testing.T) {
	cfg := defaultTestConfig()
	cfg.NumTraces = 5
	p, sink, tel := newTestProcessor(t, cfg)
	var order []pcommon.TraceID
	clock := int64(1)
	p.now = func() int64 { clock++; return clock }
	for i := uint64(0); i < 20; i++ {
		in := withoutRoot(buildOneTask())
		for sp := range spaniter.All(in) {
			id := sp.TraceID()
			id[0], id[1] = byte(i), 0x5a
			sp.SetTraceID(id)
		}
		order = append(order, in.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())
		require.NoError(t, p.ConsumeTraces(context.Background(), in))
		assert.LessOrEqual(t, p.nTraces.Load(), int64(5))
	}
	assert.Equal(t, int64(5), p.nTraces.Load())
	assert.Equal(t, int64(15), releasedBy(t, tel, "capacity"))
	var firstSeen []pcommon.TraceID
	seen := map[pcommon.TraceID]bool{}
	for _, td := range sink.AllTraces() {
		for sp := range spaniter.All(td) {
			if !seen[sp.TraceID()] {
				seen[sp.TraceID()] = true
				firstSeen = append(firstSeen, sp.TraceID())
			}
		}
	}
	assert.Equal(t, order[:15], firstSeen, "oldest released first")
	require.NoError(t, p.Shutdown(context.Background()))
}

// arrivalSpan is one span of a generated run with the resource and scope it came under.
type arrivalSpan struct {
	rs ptrace.ResourceSpans
	ss ptrace.ScopeSpans
	sp ptrace.Span
}

func flatSpans(td ptrace.Traces) []arrivalSpan {
	var out []arrivalSpan
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				out = append(out, arrivalSpan{rs, ss, ss.Spans().At(k)})
			}
		}
	}
	return out
}

func batchOf(items []arrivalSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, it := range items {
		rs := td.ResourceSpans().AppendEmpty()
		it.rs.Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		it.ss.Scope().CopyTo(ss.Scope())
		it.sp.CopyTo(ss.Spans().AppendEmpty())
	}
	return td
}

// split cuts items into n batches in their order.
func split(items []arrivalSpan, n int) []ptrace.Traces {
	var out []ptrace.Traces
	per := max((len(items)+n-1)/n, 1)
	for i := 0; i < len(items); i += per {
		out = append(out, batchOf(items[i:min(i+per, len(items))]))
	}
	return out
}

// underTask reports whether sp sits below a task tool span: a subagent's part of the run.
func underTask(all []arrivalSpan, sp ptrace.Span) bool {
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, it := range all {
		byID[it.sp.SpanID()] = it.sp
	}
	for p, steps := sp.ParentSpanID(), 0; !p.IsEmpty() && steps < len(all); steps++ {
		ps, ok := byID[p]
		if !ok {
			return false
		}
		if n, _ := ps.Attributes().Get(genai.AttrToolName); n.Str() == genai.TaskToolName {
			return true
		}
		p = ps.ParentSpanID()
	}
	return false
}

// A model call of a subagent that arrives after its trace was released is attributed
// to that subagent from the trace's record, like the merge.
func TestLateModelCallIsAttributedByShape(t *testing.T) {
	b := newTraceBuilder(91)
	lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
	b.chat(lead, usage(1, 1), "call_x")
	_, sub := b.task(lead, "call_x", "researcher", genai.SubagentCompleted)
	b.chat(sub, usage(2, 2)) // its answer
	b.chat(lead, usage(3, 3))
	early := clone(b.td)
	b.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(ptrace.Span) bool { return true })
	late := b.chat(sub, usage(5, 5)) // a step nothing named, arriving after the release
	lateID := late.SpanID()
	p, sink, _ := newTestProcessor(t, defaultTestConfig())
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.NoError(t, p.ConsumeTraces(context.Background(), early))
	require.Equal(t, early.SpanCount(), sink.SpanCount(), "complete: released at once")
	require.NoError(t, p.ConsumeTraces(context.Background(), clone(b.td)))
	var got ptrace.Span
	for sp := range spaniter.All(sink.AllTraces()[1]) {
		if sp.SpanID() == lateID {
			got = sp
		}
	}
	caller, _ := got.Attributes().Get(genai.AttrCaller)
	assert.Equal(t, "subagent:researcher", caller.Str())
	fix := spanByCalls(t, canonical(sink.AllTraces()[1]), "call_x")
	assertSubagent(t, fix, genai.Usage{Input: 7, Output: 7}, 1, "call_x")
}

// Records for corrections are bounded in bytes: past the bound the earliest recorded
// traces lose theirs (their late spans are then marked late, not merged), and the latest
// ones keep theirs, since late spans are likeliest to come for them.
func TestRecordsKeepTheLatestWithinTheBound(t *testing.T) {
	// two traces of one shard, so one shard's budget decides between them
	a := uint64(93)
	bNo := a + 1
	for shardIndex(newTraceBuilder(bNo).tid) != shardIndex(newTraceBuilder(a).tid) {
		bNo++
	}
	type run struct {
		early, late ptrace.Traces
		lateID      pcommon.SpanID
	}
	build := func(no uint64) run {
		b := newTraceBuilder(no)
		lead := b.agent(pcommon.SpanID{}, genai.LeadAgentName).SpanID()
		b.chat(lead, usage(1, 1), "call_x")
		_, sub := b.task(lead, "call_x", "researcher", genai.SubagentCompleted)
		b.chat(sub, usage(2, 2))
		b.chat(lead, usage(3, 3))
		early := clone(b.td)
		b.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(ptrace.Span) bool { return true })
		late := b.chat(sub, usage(5, 5))
		return run{early: early, late: clone(b.td), lateID: late.SpanID()}
	}
	first, second := build(a), build(bNo)
	p, sink, _ := newTestProcessor(t, defaultTestConfig())
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	require.NoError(t, p.ConsumeTraces(context.Background(), first.early))
	one := p.records.Load()
	require.Positive(t, one, "a released trace keeps a record")
	p.maxRecords = numShards * (one * 3 / 2) // one record per shard fits, two do not
	require.NoError(t, p.ConsumeTraces(context.Background(), second.early))
	assert.Equal(t, one, p.records.Load(), "the earlier record went, the later one stayed")

	correctedAfter := func(r run) int {
		before := len(sink.AllTraces())
		require.NoError(t, p.ConsumeTraces(context.Background(), r.late))
		n := 0
		for _, td := range sink.AllTraces()[before:] {
			for sp := range spaniter.All(td) {
				if sp.SpanID() != r.lateID {
					n++ // a re-emitted dispatcher
				}
			}
		}
		return n
	}
	assert.Zero(t, correctedAfter(first), "no record: nothing to correct")
	assert.Equal(t, 1, correctedAfter(second), "its dispatcher corrected from its record")
	fix := spanByCalls(t, canonical(sink.AllTraces()[len(sink.AllTraces())-1]), "call_x")
	assertSubagent(t, fix, genai.Usage{Input: 7, Output: 7}, 1, "call_x")
	assert.LessOrEqual(t, p.records.Load(), p.maxRecords)
}

// The bound holds whatever order the records are kept in: a trace released earlier may
// have its record kept after a later one's (its recording ran longer, outside the lock).
func TestRecordsBoundedInAnyKeepOrder(t *testing.T) {
	var total atomic.Int64
	s := &shard{}
	s.init(&total)
	ids := make([]pcommon.TraceID, 4)
	for i := range ids {
		ids[i][0] = byte(i + 1)
		s.addTombstone(ids[i], spanSet{}, nil, int64(i+1), int64(time.Hour), 100)
	}
	rec := make([]byte, 100)
	const budget = 250                    // two records fit
	for _, i := range []int{1, 2, 0, 3} { // the first released is kept third
		s.setRecord(s.released[ids[i]], rec, nil)
		s.trimRecords(budget)
		require.LessOrEqual(t, s.recBytes, int64(budget))
	}
	assert.Equal(t, int64(200), total.Load())
	assert.Nil(t, s.released[ids[1]].skel, "kept first, dropped first")
	assert.Nil(t, s.released[ids[2]].skel)
	assert.NotNil(t, s.released[ids[0]].skel)
	assert.NotNil(t, s.released[ids[3]].skel)

	// a corrected record goes to the back: the next one dropped is the other
	s.setRecord(s.released[ids[0]], rec[:90], nil)
	s.setRecord(s.released[ids[1]], rec, nil)
	s.trimRecords(budget)
	assert.Nil(t, s.released[ids[3]].skel, "the earliest kept and not corrected since")
	assert.NotNil(t, s.released[ids[0]].skel)
	assert.Equal(t, s.recBytes, total.Load())
}
