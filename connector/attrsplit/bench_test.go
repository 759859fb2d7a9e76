package attrsplit

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pipeline"

	"github.com/agentmeter/agentmeter/connector/attrsplit/internal/metadatatest"
)

// benchBatch is 100 spans with ten attributes each; every placed-th span carries the
// attribute (0: none does).
func benchBatch(placed int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "lead-agent")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range 100 {
		s := spans.AppendEmpty()
		s.SetName("chat")
		s.SetSpanID(pcommon.SpanID{byte(i), 1})
		for k := range 10 {
			s.Attributes().PutStr(string(rune('a'+k))+".attr", "a value of some length")
		}
		if placed > 0 && i%placed == 0 {
			s.Attributes().PutStr(key, "20260101T000000000000Z0100000000000000")
		}
	}
	return td
}

// changer is a pipeline that may change what it gets (the shipped merges), doing nothing.
type changer struct{}

func (changer) Capabilities() consumer.Capabilities                { return consumer.Capabilities{MutatesData: true} }
func (changer) ConsumeTraces(context.Context, ptrace.Traces) error { return nil }

// BenchmarkSplit is the connector's cost per span (ns/op and allocs/op are per span),
// with what the collector's fanouts add. shipped is the shipped config's place: after
// the merge, the batch read-only (Langfuse and the token metrics read it too), both
// LangSmith pipelines only reading it. changing is two branches that change data (two
// merges side by side, as an earlier shipped config had them): the fanout clones the
// batch for one of them when both take it whole. clone_for_comparison is the clone a
// forward connector's fanout makes of a batch for a branch that changes it.
func BenchmarkSplit(b *testing.B) {
	cases := []struct {
		name     string
		placed   int
		p        Pipelines
		readOnly bool // the pipelines only read, and the batch is shared
	}{
		{"shipped/no_span_placed", 0, Pipelines{With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, true},
		{"shipped/every_span_placed", 1, Pipelines{With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, true},
		{"shipped/half_placed", 2, Pipelines{With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, true},
		{"changing/no_span_placed", 0, Pipelines{All: []pipeline.ID{pAll}, Without: []pipeline.ID{pWithout}}, false},
		{"changing/every_span_placed", 1, Pipelines{All: []pipeline.ID{pAll}, Without: []pipeline.ID{pWithout}}, false},
		{"changing/half_placed", 2, Pipelines{All: []pipeline.ID{pAll}, Without: []pipeline.ID{pWithout}}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cm := map[pipeline.ID]consumer.Traces{}
			for _, id := range append(append(c.p.All, c.p.Without...), c.p.With...) {
				if c.readOnly {
					cm[id] = consumertest.NewNop()
				} else {
					cm[id] = changer{}
				}
			}
			cfg := &Config{Attribute: key, Pipelines: c.p}
			conn, err := NewFactory().CreateTracesToTraces(context.Background(), metadatatest.NewSettings(componenttest.NewTelemetry()), cfg, connector.NewTracesRouter(cm))
			require.NoError(b, err)
			td := benchBatch(c.placed)
			if c.readOnly {
				td.MarkReadOnly()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 100 {
				_ = conn.ConsumeTraces(context.Background(), td)
			}
		})
	}
	b.Run("clone_for_comparison", func(b *testing.B) {
		td := benchBatch(2)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += 100 {
			out := ptrace.NewTraces()
			td.CopyTo(out)
		}
	})
}
