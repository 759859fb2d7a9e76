//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

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
