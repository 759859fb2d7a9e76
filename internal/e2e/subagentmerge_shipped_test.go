//go:build e2e

package e2e

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// The arrival orders of the issue that led to the completeness rule, through the shipped
// config: each run's spans in 3–4 requests, root last, root first, root first with the
// subagents' spans 2 s later, shuffled, shuffled and duplicated. Once every span has
// arrived, the merged usage each vendor keeps (the last version of each span id) is
// exact for every run, and every span counts once (corrections aside).
func TestSidecarMergeExactInEveryArrivalOrder(t *testing.T) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type order struct {
		name  string
		split func(r *rand.Rand, spans []ptrace.Span) [][]ptrace.Span
		later time.Duration // the last request waits this long
	}
	isRoot := func(sp ptrace.Span) bool { return sp.ParentSpanID().IsEmpty() }
	cut := func(spans []ptrace.Span, n int) [][]ptrace.Span {
		var out [][]ptrace.Span
		per := (len(spans) + n - 1) / n
		for i := 0; i < len(spans); i += per {
			out = append(out, spans[i:min(i+per, len(spans))])
		}
		return out
	}
	orders := []order{
		{"root last", func(r *rand.Rand, s []ptrace.Span) [][]ptrace.Span { return cut(s, 3) }, 0},
		{"root first", func(r *rand.Rand, s []ptrace.Span) [][]ptrace.Span {
			return cut(append([]ptrace.Span{s[len(s)-1]}, s[:len(s)-1]...), 4)
		}, 0},
		{"root first, subagents 2 s later", func(r *rand.Rand, s []ptrace.Span) [][]ptrace.Span {
			var lead, subs []ptrace.Span
			for _, sp := range s {
				if name, _ := sp.Attributes().Get(genai.AttrToolCallID); name.Str() != "" && genai.SpanOperation(sp.Name(), sp.Attributes()) == genai.OpInvokeAgent || underSubagent(s, sp) {
					subs = append(subs, sp)
				} else {
					lead = append(lead, sp)
				}
			}
			for i, sp := range lead {
				if isRoot(sp) {
					lead[0], lead[i] = lead[i], lead[0]
				}
			}
			return append(cut(lead, 2), subs)
		}, 2 * time.Second},
		{"shuffled", func(r *rand.Rand, s []ptrace.Span) [][]ptrace.Span {
			r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
			return cut(s, 4)
		}, 0},
		{"shuffled and duplicated", func(r *rand.Rand, s []ptrace.Span) [][]ptrace.Span {
			r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
			parts := cut(s, 3)
			return append(parts, parts[0], parts[2])
		}, 0},
	}
	want := map[string]genai.Usage{}
	total := 0
	for oi, o := range orders {
		for k := range 3 {
			n := uint64(500 + oi*10 + k)
			early, root := AgentRun(n)
			spans := append(Spans([]ptrace.Traces{early}), Spans([]ptrace.Traces{root})...)
			total += len(spans)
			for key, u := range AgentRunDispatch(n) {
				want[key] = u
			}
			parts := o.split(rand.New(rand.NewPCG(n, 7)), spans)
			for i, part := range parts {
				if i == len(parts)-1 && o.later > 0 {
					time.Sleep(o.later)
				}
				td := newBatch()
				for _, sp := range part {
					sp.CopyTo(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty())
				}
				require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, td), "%s run %d part %d", o.name, n, i)
			}
		}
	}
	// every span once (duplicates dropped), plus any corrections
	deadline := time.Now().Add(30 * time.Second)
	var last map[pcommon.SpanID]ptrace.Span
	for {
		out, _ := ReadTraces(tracesFile)
		last = map[pcommon.SpanID]ptrace.Span{}
		for _, sp := range Spans(out) {
			last[sp.SpanID()] = sp
		}
		if len(last) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Len(t, last, total)
	time.Sleep(3 * time.Second) // settle_time and a correction's export
	out, err := ReadTraces(tracesFile)
	require.NoError(t, err)
	for _, sp := range Spans(out) {
		last[sp.SpanID()] = sp
	}
	kept := make([]ptrace.Span, 0, len(last))
	for _, sp := range last {
		kept = append(kept, sp)
	}
	got := MergedDispatches(kept)
	exact := 0
	for key, w := range want {
		if assert.Equal(t, w, got[key], "dispatch %s", key) {
			exact++
		}
	}
	t.Logf("%d of %d dispatching spans exact at the vendors' view, %d runs in 5 orders", exact, len(want), 3*len(orders))
}

// underSubagent reports whether sp sits below a subagent's run (an invoke_agent span
// with a tool-call id, under its task).
func underSubagent(all []ptrace.Span, sp ptrace.Span) bool {
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, s := range all {
		byID[s.SpanID()] = s
	}
	for p, steps := sp.ParentSpanID(), 0; !p.IsEmpty() && steps < len(all); steps++ {
		ps, ok := byID[p]
		if !ok {
			return false
		}
		if id, _ := ps.Attributes().Get(genai.AttrToolCallID); id.Str() != "" && genai.SpanOperation(ps.Name(), ps.Attributes()) == genai.OpInvokeAgent {
			return true
		}
		p = ps.ParentSpanID()
	}
	return false
}

// Through the shipped config: a subagent's final answer arrives after the rest of its
// run went on. It is merged into the trace's ledger, the lead's dispatching span is
// re-emitted under its own span id with the corrected agentmeter.subagent.* and
// agentmeter.merge.status = corrected, and the token metrics count every model call's
// own usage once (the re-emission is skipped).
func TestSidecarLateSpanCorrectsTheDispatcherAndCountsOnce(t *testing.T) {
	ports := setSidecarEnv(t)
	tracesFile := startShippedWithFile(t, ports)
	prom := scrapeShipped(t, ports.Prometheus)

	early, root := AgentRun(7)
	// hold back subagent B's final answer (5/3): without it, B's run has no answer, so
	// the trace settles (settle_time) and goes without it
	spans := early.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	late := newBatch()
	var total int64
	for i := 0; i < spans.Len(); i++ {
		u, _ := genai.UsageFromMap(spans.At(i).Attributes())
		total += u.Input + u.Output
	}
	spans.RemoveIf(func(sp ptrace.Span) bool {
		u, _ := genai.UsageFromMap(sp.Attributes())
		if u == (genai.Usage{Input: 5, Output: 3}) {
			sp.CopyTo(late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty())
			return true
		}
		return false
	})
	require.Equal(t, 1, late.SpanCount())
	root.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(spans.AppendEmpty())
	first := early.SpanCount()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, early))
	WaitForSpans(t, tracesFile, first, 30*time.Second)
	require.NoError(t, SendOTLPHTTP(ctx, ports.OTLPHTTP, late))
	out := WaitForMergedSpans(t, tracesFile, first+1, 3*time.Second, 30*time.Second) // the late span and its corrections

	last := map[pcommon.SpanID]ptrace.Span{}
	corrected := map[pcommon.SpanID]int{}
	for _, sp := range out {
		last[sp.SpanID()] = sp
		if st, _ := sp.Attributes().Get(genai.AttrMergeStatus); st.Str() == genai.MergeCorrected {
			corrected[sp.SpanID()]++
		}
	}
	assert.Len(t, corrected, 1, "one dispatching span re-emitted")
	assert.Len(t, last, first+1, "the correction reuses its span id")
	var kept []ptrace.Span
	for _, sp := range last {
		kept = append(kept, sp)
	}
	for k, want := range AgentRunDispatch(7) {
		assert.Equal(t, want, MergedDispatches(kept)[k], "dispatch %s, as a vendor upserting by id keeps it", k)
	}

	// own usage counted once: the re-emitted span is skipped by the token metrics
	prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(total), 30*time.Second)
	time.Sleep(3 * time.Second) // two more batch timeouts and scrapes
	prom.WaitForValue(t, `sum(agentmeter_tokens_total)`, float64(total), 5*time.Second)
}
