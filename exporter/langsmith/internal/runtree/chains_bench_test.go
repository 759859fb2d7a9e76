package runtree

import (
	"testing"

	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// BenchmarkMapCached maps a trace whose spans were all mapped before: every span's run
// is rebuilt from the chain cache (a re-emission, or a retry of a batch), the path a
// benchmark over fresh traces never takes.
func BenchmarkMapCached(b *testing.B) {
	td, _ := fakevendor.AgentTrace(2, base)
	m := NewMapper("p", 1000)
	if runs, _ := m.Map(td); len(runs) != td.SpanCount() {
		b.Fatalf("%d runs of %d spans", len(runs), td.SpanCount())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if runs, _ := m.Map(td); len(runs) != td.SpanCount() {
			b.Fatalf("%d runs of %d spans", len(runs), td.SpanCount())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*td.SpanCount()), "ns/span")
}

// BenchmarkMapPlaced maps a trace whose spans all carry their placement
// (langsmith.span.dotted_order), each batch on a fresh mapper: every run is placed by the
// attribute, none from the cache.
func BenchmarkMapPlaced(b *testing.B) {
	td, _ := fakevendor.AgentTrace(2, base)
	dottedordertest.Place(td)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if runs, _ := NewMapper("p", 1000).Map(td); len(runs) != td.SpanCount() {
			b.Fatalf("%d runs of %d spans", len(runs), td.SpanCount())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*td.SpanCount()), "ns/span")
}
