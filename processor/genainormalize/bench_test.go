package genainormalize

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// BenchmarkNormalize reports the processor's cost per span over a mix of every
// convention's golden trace (model calls, tools, agents, chains), re-copied each round
// so every span is normalised from its foreign form.
func BenchmarkNormalize(b *testing.B) {
	src := ptrace.NewTraces()
	for _, gc := range goldenCases {
		gc.build().ResourceSpans().MoveAndAppendTo(src.ResourceSpans())
	}
	spans := src.SpanCount()
	n := normalizer{convs: createDefaultConfig().mask()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		work := ptrace.NewTraces() // a fresh copy: the copy's own allocations are not counted
		src.CopyTo(work)
		b.StartTimer()
		n.traces(work)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}

// BenchmarkContractSpans is the common case of agentmeter's own runtime: contract chat
// spans that need nothing, so the cost is the scan alone.
func BenchmarkContractSpans(b *testing.B) {
	src := buildSemconv()
	spans := src.SpanCount()
	n := normalizer{convs: createDefaultConfig().mask()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n.traces(src) // idempotent: the same trace is a no-op after the first round
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
