package shape

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
)

// richBatch has several runs in several resource/scope spans, plus the span fields a
// splice must carry over untouched: events, links, status, schema URLs, dropped counts.
func richBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	for i := 0; i < 3; i++ {
		langfusefake.AppendAgentTrace(td, langfusefake.DefaultAgentRun())
	}
	rs := td.ResourceSpans().At(1)
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	ss := rs.ScopeSpans().At(0)
	ss.SetSchemaUrl("https://example/scope")
	ss.Scope().SetVersion("1.2.3")
	ss.Scope().Attributes().PutStr("scope.attr", "x")
	sp := ss.Spans().At(2)
	ev := sp.Events().AppendEmpty()
	ev.SetName("gen_ai.choice")
	ev.Attributes().PutStr("k", "v")
	ln := sp.Links().AppendEmpty()
	ln.SetTraceID(pcommon.TraceID{9})
	ln.SetSpanID(pcommon.SpanID{9})
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("tool failed")
	sp.SetDroppedAttributesCount(3)
	// an empty scope and an empty resource must survive too
	rs.ScopeSpans().AppendEmpty().Scope().SetName("empty")
	td.ResourceSpans().AppendEmpty().Resource().Attributes().PutStr("service.name", "idle")
	return td
}

func marshal(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	var m ptrace.ProtoMarshaler
	b, err := m.MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// spliceMatchesApply splices td's encoding with plan and checks that the bytes decode to
// exactly td with the plan applied; it returns the spliced bytes.
func spliceMatchesApply(t *testing.T, s *Splicer, td ptrace.Traces, plan *Plan) []byte {
	t.Helper()
	spliced, err := s.Splice(nil, marshal(t, td), plan)
	require.NoError(t, err)
	applied := ptrace.NewTraces()
	td.CopyTo(applied)
	plan.Apply(applied)
	var um ptrace.ProtoUnmarshaler
	got, err := um.UnmarshalTraces(spliced)
	require.NoError(t, err)
	assert.Equal(t, marshal(t, applied), marshal(t, got))
	return spliced
}

// The spliced bytes decode to exactly the batch with the plan applied.
func TestSpliceEqualsApply(t *testing.T) {
	td := richBatch()
	plan := NewPlan(td)
	var s Splicer
	spliced := spliceMatchesApply(t, &s, td, plan)
	assert.Greater(t, len(spliced), len(marshal(t, td)))

	// the splicer's buffers are reused: a second call gives the same bytes
	again, err := s.Splice(nil, marshal(t, td), plan)
	require.NoError(t, err)
	assert.Equal(t, spliced, again)
}

func TestSpliceRejectsMismatch(t *testing.T) {
	td := richBatch()
	plan := NewPlan(td)
	var s Splicer
	small := ptrace.NewTraces()
	for range 2 {
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(small.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	}
	_, err := s.Splice(nil, marshal(t, td), NewPlan(small))
	assert.ErrorContains(t, err, "more spans than the plan covers")
	_, err = s.Splice(nil, marshal(t, ptrace.NewTraces()), plan)
	assert.ErrorContains(t, err, "plan for")
	_, err = s.Splice(nil, []byte{0x0a, 0xff}, plan)
	assert.ErrorIs(t, err, otlpwire.ErrMalformed)
}

// Planning data that already carries the planned attributes adds nothing: a retried
// half that was shaped before is not shaped twice.
func TestPlanOnShapedDataIsEmpty(t *testing.T) {
	td := richBatch()
	Traces(td)
	again := NewPlan(td)
	for i := 0; i < again.Spans(); i++ {
		assert.Empty(t, again.SpanAttrs(i), "span %d", i)
	}
}

// BenchmarkPlanAndSplice splices with the splicer and output buffer of the last call
// (reused) and with none (fresh): the exporter's pool is emptied by every garbage
// collection, and a busy collector runs several between two requests.
func BenchmarkPlanAndSplice(b *testing.B) {
	td := ptrace.NewTraces()
	for i := 0; i < 20; i++ {
		langfusefake.AppendAgentTrace(td, langfusefake.DefaultAgentRun())
	}
	var m ptrace.ProtoMarshaler
	raw, _ := m.MarshalTraces(td)
	for _, fresh := range []bool{false, true} {
		name := "reused"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			var s Splicer
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				if fresh {
					s, out = Splicer{}, nil
				}
				plan := NewPlan(td)
				out, _ = s.Splice(out[:0], raw, plan)
				plan.Release()
			}
		})
	}
}
