package subagentmerge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/testdata"
)

// The encoder's message is what copying the span under its resource and scope and
// encoding that gives, for spans under different resources and scopes in turn, and it
// leaves the span as it was.
func TestSpanEncoderEncodesWithoutChangingTheSpan(t *testing.T) {
	td := testdata.GenerateTraces(6)
	second := td.ResourceSpans().AppendEmpty()
	second.Resource().Attributes().PutStr("service.name", "other")
	ss := second.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("other-scope")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).MoveTo(ss.Spans().AppendEmpty())
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(sp ptrace.Span) bool { return sp.Name() == "" })

	var m ptrace.ProtoMarshaler
	var e spanEncoder
	for round := 0; round < 2; round++ { // the second round reuses the copies
		n := 0
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				sc := rs.ScopeSpans().At(j)
				for k := 0; k < sc.Spans().Len(); k++ {
					sp := sc.Spans().At(k)
					before := ptrace.NewSpan()
					sp.CopyTo(before)
					want := ptrace.NewTraces()
					appendUnder(want, sp, rs.Resource(), sc.Scope())
					wantEnc, err := m.MarshalTraces(want)
					require.NoError(t, err)

					got, err := e.encode(&m, sp, rs.Resource(), sc.Scope())
					require.NoError(t, err)
					assert.Equal(t, wantEnc, got)
					assert.Equal(t, before, sp, "the span is moved back whole")
					n++
				}
			}
		}
		require.Equal(t, 6, n)
	}
	e.reset()
	assert.False(t, e.ready)
}
