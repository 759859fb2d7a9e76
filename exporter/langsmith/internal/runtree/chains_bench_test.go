package runtree

import (
	"testing"

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
