package subagentmerge

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// A released trace's chunks are joined in a buffer the next release reuses: what the
// first release decoded must not change when the second overwrites that buffer, nor
// may a trace stored in one chunk or in several decode differently: its spans under one
// resource and scope, each decoded once, however many chunks repeated them.
func TestAppendHeldJoinBufferReuse(t *testing.T) {
	p, _, _ := newTestProcessor(t, createDefaultConfig())
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	chunked := func(traceNo uint64, perChunk int) (held, ptrace.Traces) {
		b := newTraceBuilder(traceNo)
		root := b.agent([8]byte{}, "lead_agent")
		for i := range 7 {
			u := genai.Usage{Input: int64(100 + i), Output: int64(traceNo)}
			b.chat(root.SpanID(), &u, "call_"+string(rune('a'+i)))
		}
		var h held
		want := ptrace.NewTraces()
		b.td.CopyTo(want)
		all := b.spans
		for from := 0; from < all.Len(); from += perChunk {
			part := ptrace.NewTraces()
			b.td.ResourceSpans().At(0).Resource().CopyTo(part.ResourceSpans().AppendEmpty().Resource())
			ss := part.ResourceSpans().At(0).ScopeSpans().AppendEmpty()
			b.td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
			for i := from; i < min(from+perChunk, all.Len()); i++ {
				all.At(i).CopyTo(ss.Spans().AppendEmpty())
			}
			enc, err := p.marshaler.MarshalTraces(part)
			require.NoError(t, err)
			h.chunks = append(h.chunks, enc)
		}
		return h, want
	}

	var outs []ptrace.Traces
	var wants []ptrace.Traces
	for i, perChunk := range []int{3, 2, 8, 1} { // several chunks, one, several again
		h, want := chunked(uint64(i+1), perChunk)
		out := ptrace.NewTraces()
		spans, err := p.appendHeld(out, h, nil)
		require.NoError(t, err)
		require.Len(t, spans, 8)
		for _, c := range h.chunks { // the stored chunks are the caller's: they stay as they were
			clear(c)
		}
		outs, wants = append(outs, out), append(wants, want)
	}
	for i := range outs {
		require.NoError(t, ptracetest.CompareTraces(wants[i], outs[i]), "trace %d", i+1)
	}
}
