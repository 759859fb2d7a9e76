package subagentmerge

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/groupbytraceprocessor"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/agentmeter/agentmeter/genai"
)

// The benchmarks run subagentmerge, contrib's groupbytrace (the same buffering job
// without the merge) and a pass-through over the same generated agent traces:
// benchTraces concurrent runs, exported the way an SDK does (spans in end order, so a
// run's root comes last, runs interleaved, benchBatch spans per request).
const (
	benchTraces = 2000
	benchBatch  = 512
)

// endOrder returns td's spans in post-order (children before their parent, siblings in
// start order): the order spans end, and so the order an SDK exports them.
func endOrder(td ptrace.Traces) []ptrace.Span {
	spans := appendSpans(nil, td)
	children := map[pcommon.SpanID][]ptrace.Span{}
	var roots []ptrace.Span
	for _, sp := range spans {
		if sp.ParentSpanID().IsEmpty() {
			roots = append(roots, sp)
		} else {
			children[sp.ParentSpanID()] = append(children[sp.ParentSpanID()], sp)
		}
	}
	out := make([]ptrace.Span, 0, len(spans))
	var visit func(ptrace.Span)
	visit = func(sp ptrace.Span) {
		for _, c := range children[sp.SpanID()] {
			visit(c)
		}
		out = append(out, sp)
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

// benchWorkload builds the request batches; dropRoots leaves every run unfinished (for
// the buffered-heap measurement).
func benchWorkload(dropRoots bool) (batches []ptrace.Traces, spans int) {
	r := rand.New(rand.NewPCG(42, 42))
	streams := make([][]ptrace.Span, benchTraces)
	for i := range streams {
		td := randomAgentTrace(r, uint64(i+1))
		nameCallers(td)
		streams[i] = endOrder(td)
		if dropRoots {
			streams[i] = streams[i][:len(streams[i])-1]
		}
	}
	cur := ptrace.NewTraces()
	var ss ptrace.SpanSlice
	newBatch := func() {
		cur = ptrace.NewTraces()
		rs := cur.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "deer-flow")
		rs.Resource().Attributes().PutStr("service.version", "2.0.0")
		rs.Resource().Attributes().PutStr("host.name", "agent-7f9c")
		sc := rs.ScopeSpans().AppendEmpty()
		sc.Scope().SetName("agentmeter/runtime")
		ss = sc.Spans()
		batches = append(batches, cur)
	}
	newBatch()
	// interleave: a few spans of each active run at a time, like concurrent runs ending
	for live := true; live; {
		live = false
		for i := range streams {
			take := min(len(streams[i]), 1+r.IntN(4))
			for _, sp := range streams[i][:take] {
				if ss.Len() == benchBatch {
					newBatch()
				}
				sp.CopyTo(ss.AppendEmpty())
				spans++
			}
			streams[i] = streams[i][take:]
			live = live || len(streams[i]) > 0
		}
	}
	return batches, spans
}

// nameCallers gives every model call the agentmeter.caller the agentmeter runtime
// writes on its spans (every span of a run carries it): the lead's bucket, or the
// subagent's whose run it is in.
func nameCallers(td ptrace.Traces) {
	spans := appendSpans(nil, td)
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, sp := range spans {
		byID[sp.SpanID()] = sp
	}
	for _, sp := range spans {
		if !genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
			continue
		}
		caller := genai.BucketLeadAgent
		for p, ok := byID[sp.ParentSpanID()]; ok; p, ok = byID[p.ParentSpanID()] {
			if name, run := genai.AgentRunName(p.Name(), p.Attributes()); run && name != genai.LeadAgentName {
				caller = genai.SubagentCaller(name)
				break
			}
		}
		sp.Attributes().PutStr(genai.AttrCaller, caller)
	}
}

type countingSink struct{ spans atomic.Int64 }

func (s *countingSink) consumer() consumer.Traces {
	c, _ := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		s.spans.Add(int64(td.SpanCount()))
		return nil
	})
	return c
}

type benchTarget struct {
	name string
	make func(b *testing.B, next consumer.Traces, wait time.Duration) processor.Traces
}

var benchTargets = []benchTarget{
	{"passthrough", func(_ *testing.B, next consumer.Traces, _ time.Duration) processor.Traces {
		return passThrough{next}
	}},
	{"groupbytrace", func(b *testing.B, next consumer.Traces, wait time.Duration) processor.Traces {
		f := groupbytraceprocessor.NewFactory()
		cfg := f.CreateDefaultConfig().(*groupbytraceprocessor.Config)
		cfg.WaitDuration = wait
		cfg.NumTraces = 1_000_000
		p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(component.MustNewType("groupbytrace")), cfg, next)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}},
	// the default: stream mode, every span on at once, a ledger per trace
	{"subagentmerge", subagentMergeTarget(ModeStream)},
	// stream mode with its ledgers on a real file_storage (as shipped)
	{"subagentmerge_storage", subagentMergeStorageTarget(ModeStream)},
	// hold mode: spans buffered until their trace is complete (pdata for compact_after, then encoded)
	{"subagentmerge_hold", subagentMergeTarget(ModeHold)},
	// hold mode with the buffer on disk: what holding durably costs
	{"subagentmerge_hold_storage", subagentMergeStorageTarget(ModeHold)},
	// gather mode (hold mode's wait without its merge, after a stream merge), on disk as
	// shipped for LangSmith's unplaced spans
	{"subagentmerge_gather_storage", subagentMergeStorageTarget(ModeGather)},
}

// subagentMergeStorageTarget is subagentmerge with `storage` on a real file_storage
// extension in a temporary directory.
func subagentMergeStorageTarget(mode string) func(*testing.B, consumer.Traces, time.Duration) processor.Traces {
	return func(b *testing.B, next consumer.Traces, wait time.Duration) processor.Traces {
		return newStorageTarget(b, next, wait, mode)
	}
}

func newStorageTarget(b *testing.B, next consumer.Traces, wait time.Duration, mode string) processor.Traces {
	f := filestorage.NewFactory()
	fcfg := f.CreateDefaultConfig().(*filestorage.Config)
	fcfg.Directory = b.TempDir()
	fcfg.Compaction.Directory = fcfg.Directory
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), fcfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	id := component.NewID(f.Type())
	cfg := createDefaultConfig()
	cfg.Mode = mode
	cfg.WaitDuration = wait
	cfg.NumTraces = 1_000_000
	cfg.Storage = &id
	p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
	if err != nil {
		b.Fatal(err)
	}
	return withStorage{subagentMerge: p, ext: ext, id: id}
}

// withStorage starts the processor with its storage extension and shuts both down.
type withStorage struct {
	*subagentMerge
	ext extension.Extension
	id  component.ID
}

func (w withStorage) Start(ctx context.Context, _ component.Host) error {
	return w.subagentMerge.Start(ctx, storageHost{ext: map[component.ID]component.Component{w.id: w.ext}})
}

func (w withStorage) Shutdown(ctx context.Context) error {
	return errors.Join(w.subagentMerge.Shutdown(ctx), w.ext.Shutdown(ctx))
}

func subagentMergeTarget(mode string) func(*testing.B, consumer.Traces, time.Duration) processor.Traces {
	return func(b *testing.B, next consumer.Traces, wait time.Duration) processor.Traces {
		cfg := createDefaultConfig()
		cfg.Mode = mode
		cfg.WaitDuration = wait
		cfg.NumTraces = 1_000_000
		p, err := newProcessor(processortest.NewNopSettings(Type), cfg, next)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
}

// passThrough is "no buffering at all".
type passThrough struct{ next consumer.Traces }

func (passThrough) Start(context.Context, component.Host) error { return nil }
func (passThrough) Shutdown(context.Context) error              { return nil }
func (passThrough) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}
func (p passThrough) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return p.next.ConsumeTraces(ctx, td)
}

func cloneAll(in []ptrace.Traces) []ptrace.Traces {
	out := make([]ptrace.Traces, len(in))
	for i, td := range in {
		out[i] = clone(td)
	}
	return out
}

// benchWait is both processors' wait_duration in the throughput run. It must outlast
// the feed: groupbytrace starts a trace's timer at its first span and never extends it,
// and a trace whose spans keep arriving around its release loses spans there (seen
// with 20 ms: 38k of 68k spans came out). subagentmerge releases these runs on
// completion, so its wait does not matter here.
const benchWait = time.Second

// BenchmarkThroughput reports two rates: ingest (spans/s until the last ConsumeTraces
// returned, what a receiver sees) and e2e (until the last span reached the next
// consumer; for groupbytrace that includes its wait_duration).
func BenchmarkThroughput(b *testing.B) {
	template, n := benchWorkload(false)
	for _, tgt := range benchTargets {
		b.Run(tgt.name, func(b *testing.B) {
			var elapsed, ingest time.Duration
			var lost, recordBytes int64
			for range b.N {
				b.StopTimer()
				batches := cloneAll(template)
				sink := &countingSink{}
				p := tgt.make(b, sink.consumer(), benchWait)
				if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
				start := time.Now()
				for _, td := range batches {
					if err := p.ConsumeTraces(context.Background(), td); err != nil {
						b.Fatal(err)
					}
				}
				ingest += time.Since(start)
				deadline := time.Now().Add(benchWait + 30*time.Second)
				for sink.spans.Load() < int64(n) && time.Now().Before(deadline) {
					time.Sleep(200 * time.Microsecond)
				}
				lost += int64(n) - sink.spans.Load()
				elapsed += time.Since(start)
				b.StopTimer()
				recordBytes += recordSize(p)
				if err := p.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/ingest.Seconds(), "ingest_spans/s")
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "e2e_spans/s")
			// groupbytrace loses spans of traces still arriving when their timer fires
			// (the feed outlasting wait_duration on a loaded machine); reported, not hidden
			b.ReportMetric(float64(lost)/float64(b.N), "lost_spans/op")
			// what released traces' records (for late spans) hold, per span that went through
			b.ReportMetric(float64(recordBytes)/float64(n)/float64(b.N), "record_B/span")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkHeapPerBufferedSpan: live heap held per span, with every run unfinished (roots
// withheld) and a wait_duration long enough that nothing is released (hold mode) or that
// no ledger ends (stream mode: the ledgers are what is held).
func BenchmarkHeapPerBufferedSpan(b *testing.B) {
	for _, tgt := range benchTargets[1:] {
		b.Run(tgt.name, func(b *testing.B) {
			var perSpan float64
			for range b.N {
				sink := &countingSink{}
				p := tgt.make(b, sink.consumer(), time.Hour)
				if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					b.Fatal(err)
				}
				before := liveHeap()
				batches, n := benchWorkload(true)
				for i, td := range batches {
					if err := p.ConsumeTraces(context.Background(), td); err != nil {
						b.Fatal(err)
					}
					batches[i] = ptrace.Traces{} // the caller lets go of the request
				}
				batches = nil
				// groupbytrace stores asynchronously; subagentmerge compacts after 1s; in
				// stream mode the corrections due after settle_time go out first, so the
				// figure is what the ledgers keep, not a sweep in flight
				time.Sleep(2 * time.Second)
				waitNoneDue(b, p)
				if streams(p) {
					// a ledger idle for compact_after is frozen: what waiting runs' ledgers hold
					time.Sleep(time.Second + 2*sweepInterval(time.Second))
				}
				after := liveHeap()
				perSpan += float64(after-before) / float64(n)
				// stream mode holds no span, only its ledgers: what they hold per span
				// is the figure; every span must have gone on
				if streams(p) {
					if got := sink.spans.Load(); got < int64(n) {
						b.Fatalf("%d of %d spans went on; stream mode passes every span on at once", got, n)
					}
				} else if sink.spans.Load() != 0 {
					b.Fatalf("%d spans were released; the measurement needs them buffered", sink.spans.Load())
				}
				runtime.KeepAlive(p)
				b.StopTimer()
				_ = p.Shutdown(context.Background())
				b.StartTimer()
			}
			b.ReportMetric(perSpan/float64(b.N), "heapB/span")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// recordSize is the bytes p keeps for corrections, its ledgers or its tombstones'
// records (0 for other targets).
func recordSize(p processor.Traces) int64 {
	m := mergeOf(p)
	if m == nil {
		return 0
	}
	n := m.ledgerBytes.Load()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for _, t := range s.released {
			n += int64(len(t.skel) + len(t.sent))
		}
		s.mu.Unlock()
	}
	return n
}

// waitNoneDue waits, for subagentmerge in stream mode, until no ledger has a
// re-emission due and one more sweep has ended.
func waitNoneDue(b *testing.B, p processor.Traces) {
	m := mergeOf(p)
	if m == nil || !m.stream {
		return
	}
	due := func() bool {
		for i := range m.shards {
			s := &m.shards[i]
			s.mu.Lock()
			d := s.led.due.head != nil
			s.mu.Unlock()
			if d {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for due() {
		if time.Now().After(deadline) {
			b.Fatal("re-emissions still due after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(sweepInterval(time.Duration(m.settle)) + 50*time.Millisecond)
}

// streams reports whether target p is subagentmerge in stream mode.
func streams(p processor.Traces) bool {
	m := mergeOf(p)
	return m != nil && m.stream
}

// mergeOf is the subagentmerge processor under target p, or nil for another target.
func mergeOf(p processor.Traces) *subagentMerge {
	switch v := p.(type) {
	case *subagentMerge:
		return v
	case withStorage:
		return v.subagentMerge
	}
	return nil
}

// BenchmarkFingerprint: what the merge wrote on a dispatcher, hashed (each merge run
// hashes every kept span of its trace).
func BenchmarkFingerprint(b *testing.B) {
	m := pcommon.NewMap()
	genai.PutUsage(m, genai.Usage{Input: 1200, Output: 340})
	m.PutStr(genai.AttrRequestModel, "gpt-4o")
	m.PutStr(genai.AttrCaller, "lead_agent")
	m.PutStr(genai.AttrMergeStatus, genai.MergeMerged)
	m.PutInt(genai.AttrSubagentInput, 52_000)
	m.PutInt(genai.AttrSubagentOutput, 7_300)
	m.PutInt(genai.AttrSubagentTotal, 59_300)
	m.PutInt(genai.AttrSubagentDispatches, 2)
	m.PutDouble(genai.AttrSubagentCostTotal, 0.2031)
	m.PutDouble(genai.AttrSubagentCostInput, 0.13)
	ids := m.PutEmptySlice(genai.AttrSubagentToolCallIDs)
	ids.AppendEmpty().SetStr("call_0a1b2c3d")
	ids.AppendEmpty().SetStr("call_4e5f6a7b")
	b.ReportAllocs()
	for b.Loop() {
		_ = fingerprint(m)
	}
}
