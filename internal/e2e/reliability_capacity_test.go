//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

// counterOK reads a metric from the collector's own metrics under either exposition name
// (with or without the _total suffix); found is false when neither has a matching series.
func counterOK(m faulty.Metrics, name string, labels ...string) (v float64, found bool) {
	a, okA := m.Sum(name, labels...)
	b, okB := m.Sum(name+"_total", labels...)
	return a + b, okA || okB
}

// counter is counterOK for a series that must be there: a missing one fails the test
// instead of reading as zero.
func counter(t testing.TB, m faulty.Metrics, name string, labels ...string) float64 {
	t.Helper()
	v, found := counterOK(m, name, labels...)
	if !found {
		t.Fatalf("the collector exports no %s %v", name, labels)
	}
	return v
}

// kill -9 mid-stream with file_storage persistent queues: the first crash while the
// vendors are down (a backlog on disk), the second while they are up (requests in
// flight). The sender retries while the collector is gone. Nothing the collector
// accepted is lost; what the vendors got twice (sent, then still in the queue at the
// crash) is counted as duplicates — both vendors upsert by id, so it is harmless there.
func TestReliabilityKill9PersistentQueue(t *testing.T) {
	d := FaultDuration(t)
	r := NewFaultRig(t, FaultRigOptions{Persistent: true})
	l, stop := r.SteadyLoad()
	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)

	// crash 1: vendors down, the queues hold the backlog on disk
	r.LF.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
	r.LS.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
	time.Sleep(d / 2)
	queued := r.Metrics(t)
	backlog := counter(t, queued, "otelcol_exporter_queue_size", `exporter="langfuse"`)
	r.Collector.Kill()
	killed1 := time.Now()
	backlogSpans, backlogRuns := l.SpanIDs(), l.RunIDs()
	r.LF.Clear()
	r.LS.Clear()
	time.Sleep(300 * time.Millisecond) // the sender meets a closed port and retries
	r.Restart(t, nil)
	// recovery: from the crash until the backlog the dead process held is at the vendors
	recovered := r.WaitIDs(t, l, backlogSpans, backlogRuns, killed1, 2*time.Minute, false)

	// crash 2: vendors up, mid-stream
	time.Sleep(d / 2)
	r.Collector.Kill()
	time.Sleep(300 * time.Millisecond)
	r.Restart(t, nil)
	time.Sleep(time.Second)
	stop()

	got := r.WaitDelivered(t, l, killed1, 2*time.Minute, false)
	t.Logf("kill -9 x2: %+v, langfuse queue before crash 1: %.0f requests", got, backlog)
	s := l.Stats()
	assert.Positive(t, s.Refusals[0], "the sender met the dead collector and retried")
	assert.Positive(t, backlog, "crash 1 happened with a backlog in the queue")
	assert.Zero(t, got.LFLost, "spans lost at Langfuse")
	assert.Zero(t, got.LSLost, "runs lost at LangSmith")
	assert.Equal(t, got.SentTokens, got.LFTokens)
	assert.Equal(t, got.SentTokens, got.LSTokens)
	assert.Empty(t, r.LFFake.Problems())
	assert.Empty(t, r.LSFake.Violations())
	r.AssertNoSecrets(t)
	ReliabilityRow(t, "kill -9 of the collector, twice (vendors down / up), file_storage queues",
		"the queue is on disk: the restarted process sends what the dead one held; the sender retries while the port is closed; entries in flight at the crash are sent again",
		fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens), "Langfuse 0 / LangSmith 0",
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup),
		fmt.Sprintf("%s from the 1st crash (incl. 300 ms down + restart) to its backlog delivered", recovered.Recovery.Round(100*time.Millisecond)),
		fmt.Sprintf("sender retries while down: %d", s.Refusals[0]))
}

// Overload past memory_limiter: the vendors are down so everything piles up in memory
// queues, and two senders push 32 KiB attributes as fast as they are let. The receiver
// refuses with a retryable status once the limiter trips, the process stays under its
// memory limit (limit_mib × 1.5, the ratio deploy/sidecar-pod.yaml uses: 512 MiB under a
// 768 MiB container, with GOMEMLIMIT at 600/512 of limit_mib as there), and after the
// vendors return every accepted span arrives. RSS counts the binary's resident pages too
// (about 49 MiB of it here).
func TestReliabilityOverloadMemoryLimiter(t *testing.T) {
	d := FaultDuration(t)
	const limitMiB = 128
	processLimit := int64(limitMiB*3/2) << 20
	r := NewFaultRig(t, FaultRigOptions{LimitMiB: limitMiB, SpikeMiB: 32})
	r.LF.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
	r.LS.Set(faulty.Fault{Kind: faulty.Status, Status: 503})

	var peak int64
	var mu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := faulty.RSS(r.Collector.Pid()); err == nil {
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var loads []*faulty.Load
	var stops []func()
	for i := 0; i < 2; i++ {
		l, stop := r.LoadAt(10*time.Millisecond, 10, 32<<10)
		loads, stops = append(loads, l), append(stops, stop)
	}
	refused := func() int {
		n := 0
		for _, l := range loads {
			s := l.Stats()
			n += s.Refusals[503] + s.Refusals[429]
		}
		return n
	}
	deadline := time.Now().Add(60*time.Second + d)
	for refused() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(d) // held at the limit
	for _, stop := range stops {
		stop()
	}
	stopSampling()
	<-sampled
	r.LF.Clear()
	r.LS.Clear()
	cleared := time.Now()

	var sent int
	var tokens int64
	var rows []Delivery
	for _, l := range loads {
		got := r.WaitDelivered(t, l, cleared, 3*time.Minute, false)
		rows = append(rows, got)
		sent += int(got.Sent)
		tokens += got.SentTokens
		assert.Zero(t, got.LFLost, "spans lost at Langfuse")
		assert.Zero(t, got.LSLost, "runs lost at LangSmith")
		assert.Zero(t, l.Stats().Permanent, "no request refused for good")
	}
	m := r.Metrics(t)
	limiterRefused := counter(t, m, "otelcol_receiver_refused_spans", `receiver="otlp"`)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("overload: peak RSS %.1f MiB (limit %d MiB, process limit %d MiB), %d refusals, receiver refused %.0f spans, %d spans sent",
		float64(peak)/(1<<20), limitMiB, processLimit>>20, refused(), limiterRefused, sent)
	assert.Positive(t, refused(), "the receiver refused with a retryable status")
	assert.Positive(t, limiterRefused, "the collector counts the refused spans")
	assert.Less(t, peak, processLimit, "RSS stays under the process memory limit")
	// what the vendors hold, less what each sender abandoned in flight when it stopped
	// (a request the collector took whose answer the sender never read: Unsure)
	lfTokens, lsTokens := r.LF.Stats().Tokens, r.LS.Stats().Tokens
	for _, l := range loads {
		d := r.delivery(l, l.SpanIDs(), l.RunIDs())
		lfTokens -= r.LF.Stats().Tokens - d.LFTokens
		lsTokens -= r.LS.Stats().Tokens - d.LSTokens
	}
	assert.Equal(t, tokens, lfTokens)
	assert.Equal(t, tokens, lsTokens)
	r.AssertNoSecrets(t)
	last := rows[len(rows)-1]
	ReliabilityRow(t, fmt.Sprintf("overload past memory_limiter (limit_mib %d; vendors down; 2 senders of 32 KiB spans)", limitMiB),
		"the receiver answers 503 (retryable) while the heap is over the soft limit; senders back off and resend; queued data waits for the vendors",
		fmt.Sprintf("%d spans, %d tokens", sent, tokens), "Langfuse 0 / LangSmith 0",
		fmt.Sprintf("%d / %d", r.LF.Stats().Duplicates, r.LS.Stats().Duplicates),
		last.Recovery.Round(100*time.Millisecond).String(),
		fmt.Sprintf("peak RSS %.0f MiB < %d MiB; %d requests refused (%.0f spans)", float64(peak)/(1<<20), processLimit>>20, refused(), limiterRefused))
}

// subagentmerge in hold mode at capacity (num_traces: 4): the non-root spans of 12 runs arrive first,
// so 8 traces are pushed out early; then every root. Nothing is dropped (every span
// reaches both vendors and the file exporter), and the merged usage on each dispatching
// chat span is exact for every trace — whole subtrees were present when a trace was
// pushed out, and for the 4 that stayed until their root completed them.
func TestReliabilitySubagentMergeAtCapacity(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "merged.jsonl")
	r := NewFaultRig(t, FaultRigOptions{
		SubagentMerge: "{mode: hold, num_traces: 4, wait_duration: 1m, late_span_window: 2m}",
		Extra:         map[string]string{"file": fmt.Sprintf("{path: %q, format: json, flush_interval: 100ms}", out)},
	})
	const runs = 12
	var early, roots []ptrace.Traces
	total := 0
	for n := uint64(1); n <= runs; n++ {
		e, root := AgentRun(n)
		early, roots = append(early, e), append(roots, root)
		total += e.SpanCount() + root.SpanCount()
	}
	l := &faulty.Load{Addr: r.OTLP}
	maxHeld := 0.0
	for _, td := range early {
		require.True(t, l.SendRetrying(context.Background(), td))
		maxHeld = max(maxHeld, counter(t, r.Metrics(t), "otelcol_processor_subagentmerge_traces_buffered"))
	}
	assert.Equal(t, 4.0, maxHeld, "num_traces is an exact bound (not one per shard)")
	for _, td := range roots {
		require.True(t, l.SendRetrying(context.Background(), td))
	}
	got := r.WaitDelivered(t, l, time.Now(), time.Minute, false)
	spans := WaitForSpans(t, out, total, 30*time.Second)
	assert.Len(t, spans, total, "every span passes, none dropped or doubled")
	assert.Zero(t, got.LFLost)
	assert.Zero(t, got.LSLost)
	assert.Equal(t, total, got.LFAccepted)

	merged := MergedDispatches(spans)
	for n := uint64(1); n <= runs; n++ {
		for k, want := range AgentRunDispatch(n) {
			assert.Equal(t, want, merged[k], "run %d dispatch %s", n, k)
		}
	}
	var in, outU genai.Usage
	for i := range early {
		for _, sp := range Spans([]ptrace.Traces{early[i], roots[i]}) {
			u, _ := genai.UsageFromMap(sp.Attributes())
			in = in.Add(u)
		}
	}
	for _, sp := range spans {
		u, _ := genai.UsageFromMap(sp.Attributes())
		outU = outU.Add(u)
	}
	assert.Equal(t, in, outU, "own usage unchanged")
	m := r.Metrics(t)
	capacity := counter(t, m, "otelcol_processor_subagentmerge_traces_released", `reason="capacity"`)
	complete := counter(t, m, "otelcol_processor_subagentmerge_traces_released", `reason="complete"`)
	late := counter(t, m, "otelcol_processor_subagentmerge_late_spans")
	t.Logf("released: capacity %.0f, complete %.0f; late spans %.0f", capacity, complete, late)
	assert.Equal(t, float64(runs-4), capacity, "traces pushed out early by capacity")
	assert.Equal(t, float64(4), complete, "traces completed in the buffer")
	assert.Equal(t, float64(runs-4), late, "the roots of pushed-out traces pass on as late spans")
	r.AssertNoSecrets(t)
	ReliabilityRow(t, "subagentmerge at capacity (num_traces 4, 12 runs' non-root spans first, then the roots)",
		fmt.Sprintf("%.0f traces released early by capacity, %.0f completed; the %.0f late roots pass on marked late; nothing dropped", capacity, complete, late),
		fmt.Sprintf("%d spans", total), "Langfuse 0 / LangSmith 0 / file exporter 0",
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup), "n/a (no fault)",
		"merged usage exact on all 24 dispatching chat spans")
}

// kill -9 with subagentmerge in hold mode in the pipeline, its buffer on file_storage:
// the spans it holds while waiting for their trace's root
// were written to disk before the receiver acknowledged them, so the restarted process
// holds them again, and the roots sent after the restart complete the traces. SIGTERM
// releases everything held (asserted for contrast). Nothing is lost either way.
func TestReliabilityKill9KeepsSubagentMergeHeldSpans(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Collector)
	}{{"sigkill", (*Collector).Kill}, {"sigterm", (*Collector).Stop}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "merged.jsonl")
			r := NewFaultRig(t, FaultRigOptions{Persistent: true, SubagentMerge: "{mode: hold, wait_duration: 5m, storage: file_storage}",
				Extra: map[string]string{"file": fmt.Sprintf("{path: %q, format: json, flush_interval: 100ms}", out)}})
			const runs = 5
			l := &faulty.Load{Addr: r.OTLP}
			var roots []ptrace.Traces
			held, total := 0, 0
			for n := uint64(1); n <= runs; n++ {
				early, root := AgentRun(100 + n)
				require.True(t, l.SendRetrying(context.Background(), early))
				held += early.SpanCount()
				total += early.SpanCount() + root.SpanCount()
				roots = append(roots, root)
			}
			require.Eventually(t, func() bool {
				v, found := counterOK(r.Metrics(t), "otelcol_processor_subagentmerge_spans_buffered")
				return found && v == float64(held)
			}, 30*time.Second, 50*time.Millisecond, "the early spans are held, waiting for their roots")
			tc.stop(r.Collector)
			r.Restart(t, nil)
			if tc.name == "sigkill" {
				require.Eventually(t, func() bool {
					v, found := counterOK(r.Metrics(t), "otelcol_processor_subagentmerge_spans_buffered")
					return found && v == float64(held)
				}, 30*time.Second, 50*time.Millisecond, "the restarted process holds what the killed one held")
			}
			for _, root := range roots {
				require.True(t, l.SendRetrying(context.Background(), root))
			}
			got := r.WaitDelivered(t, l, time.Now(), time.Minute, false)
			t.Logf("%s: %+v (held %d)", tc.name, got, held)
			assert.Zero(t, got.LFLost, "spans lost at Langfuse")
			assert.Zero(t, got.LSLost, "runs lost at LangSmith")
			assert.Equal(t, got.SentTokens, got.LFTokens)
			if tc.name == "sigkill" {
				// the restored traces complete with their roots: merged exactly
				spans := WaitForSpans(t, out, held, 30*time.Second)
				merged := MergedDispatches(spans)
				for n := uint64(1); n <= runs; n++ {
					for k, want := range AgentRunDispatch(100 + n) {
						assert.Equal(t, want, merged[k], "run %d dispatch %s", 100+n, k)
					}
				}
				ReliabilityRow(t, fmt.Sprintf("kill -9 with subagentmerge holding %d runs' spans (roots not yet sent), buffer and queues on file_storage", runs),
					"the held spans were on disk before they were acknowledged: the restarted process holds them again and the roots complete them, merged exactly",
					fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens),
					fmt.Sprintf("Langfuse %d / LangSmith %d", got.LFLost, got.LSLost),
					fmt.Sprintf("%d / %d", got.LFDup, got.LSDup), "—", "")
			}
			r.AssertNoSecrets(t)
		})
	}
}

// kill -9 twice under steady load with a retrying sender, subagentmerge (streaming) in
// the pipeline with its ledgers on file_storage and both vendors' queues persistent:
// the ledgers of the runs in flight at each crash are restored, and every span the
// collector acknowledged reaches both vendors.
// Duplicates (sent, then still on disk at the crash) are counted, not lost.
func TestReliabilityKill9TwiceThroughTheMerge(t *testing.T) {
	d := FaultDuration(t)
	r := NewFaultRig(t, FaultRigOptions{Persistent: true, SubagentMerge: "{storage: file_storage}"})
	l, stop := r.SteadyLoad()
	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)
	start := time.Now()
	heldAtCrash := make([]float64, 0, 2)
	for range 2 {
		time.Sleep(d / 2)
		heldAtCrash = append(heldAtCrash, counter(t, r.Metrics(t), "otelcol_processor_subagentmerge_ledger_traces"))
		r.Collector.Kill()
		time.Sleep(300 * time.Millisecond) // the sender meets a closed port and retries
		r.Restart(t, nil)
	}
	time.Sleep(time.Second)
	stop()
	got := r.WaitDelivered(t, l, start, 2*time.Minute, false)
	t.Logf("kill -9 x2 through the merge: %+v; traces with a ledger at the crashes: %v", got, heldAtCrash)
	s := l.Stats()
	assert.Positive(t, s.Refusals[0], "the sender met the dead collector and retried")
	assert.Positive(t, heldAtCrash[0]+heldAtCrash[1], "the crashes hit runs the merge had ledgers of")
	assert.Zero(t, got.LFLost, "spans lost at Langfuse")
	assert.Zero(t, got.LSLost, "runs lost at LangSmith")
	assert.Equal(t, got.SentTokens, got.LFTokens)
	assert.Equal(t, got.SentTokens, got.LSTokens)
	r.AssertNoSecrets(t)
	ReliabilityRow(t, "kill -9 of the collector, twice under steady load, subagentmerge ledgers and queues on file_storage",
		"the merge holds no span (each goes on in the request that brought it, into the persistent queues); its ledgers were on disk and are read back; the sender retries while the port is closed",
		fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens), "Langfuse 0 / LangSmith 0",
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup),
		fmt.Sprintf("traces with a ledger at the crashes: %.0f and %.0f", heldAtCrash[0], heldAtCrash[1]),
		fmt.Sprintf("sender retries while down: %d", s.Refusals[0]))
}
