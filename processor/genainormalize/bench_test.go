package genainormalize

import (
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/bench/agentrun"
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
	work := ptrace.NewTraces()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		work = ptrace.NewTraces() // a fresh copy: the copy's own allocations are not counted
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

// BenchmarkBenchCompareLoad is the processor on the load of `make bench-compare`
// (bench/agentrun: DeerFlow-shaped runs of contract spans, about 34 a run, a third of them
// model calls), 20 runs per op: what the shipped sidecar pays per span for normalising
// spans that already follow the contract.
func BenchmarkBenchCompareLoad(b *testing.B) {
	td := ptrace.NewTraces()
	r := rand.New(rand.NewPCG(1, 1))
	for i := range 20 {
		agentrun.New(r, uint64(i+1)).Traces.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	spans := td.SpanCount()
	n := normalizer{convs: createDefaultConfig().mask()}
	n.traces(td) // idempotent from here on, as contract spans are from the start
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n.traces(td)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
