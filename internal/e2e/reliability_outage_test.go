//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

// The outage scenario's load and limits.
const (
	outageSpansPerSecond = 3000             // the applications' rate, all senders together
	outageSenders        = 6                // applications, each its own BatchSpanProcessor
	outageBatchRuns      = 170              // runs per request at most: 510 spans, a BatchSpanProcessor's 512
	outageFor            = 20 * time.Second // both vendors down
	outageAnswerLimit    = 5 * time.Second  // the longest a request may wait for its answer
)

// Both vendors down for 20 s while applications send 3,000 spans a second through the
// shipped otelcol-config.yaml (ports moved, vendors on by their environment variables):
// no request waits longer than 5 s for its answer (half an SDK's default 10 s export
// timeout), and every span the collector accepted reaches both vendors with its tokens.
// The senders batch as a BatchSpanProcessor does and retry refusals with exponential
// backoff, so a refused request is never counted as lost: it is sent again. Half of them
// send runs whose model calls carry finish reasons, which the LangSmith branch's merge
// releases in the request that completes them; the other half's runs it releases from
// its timer after settle_time: both ways a full LangSmith queue can be met.
func TestReliabilityShippedConfigVendorOutage(t *testing.T) {
	r := newFaultFronts(t)
	startShipped(t, "agentmeter-outage", r)()

	l := &faulty.Load{Addr: r.OTLP, Backoff: 250 * time.Millisecond, MaxBackoff: 2 * time.Second,
		Client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: outageSenders}}}
	produce, stopProducing := context.WithCancel(context.Background())
	hard, stopHard := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var batchers []*faulty.Batcher
	producingFrom := time.Now()
	for i := range outageSenders {
		b := &faulty.Batcher{Load: l, RunsPerSecond: outageSpansPerSecond / 3.0 / outageSenders,
			MaxRuns: outageBatchRuns, Delay: time.Second, FirstRun: i * 10_000_000, Answered: i%2 == 0}
		batchers = append(batchers, b)
		wg.Add(1)
		go func() { defer wg.Done(); b.Run(produce, hard) }()
	}
	t.Cleanup(func() { stopProducing(); stopHard(); wg.Wait() })
	waiting := func() (ended, left int) {
		for _, b := range batchers {
			s := b.Stats()
			ended, left = ended+s.Ended, left+s.Waiting
		}
		return ended, left
	}

	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)
	stopSampling, sample := r.sampleOutage(t, l, waiting)
	defer stopSampling()
	steadyFrom, acceptedFrom := time.Now(), l.Stats().Spans
	time.Sleep(5 * time.Second)
	steadyRate := float64(l.Stats().Spans-acceptedFrom) / time.Since(steadyFrom).Seconds()

	r.LF.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
	r.LS.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
	time.Sleep(outageFor)
	m := r.Metrics(t)
	lfQueue := counter(t, m, "otelcol_exporter_queue_size", `exporter="langfuse"`)
	lsQueue := counter(t, m, "otelcol_exporter_queue_size", `exporter="langsmith"`)
	_, backlog := waiting()
	r.LF.Clear()
	r.LS.Clear()
	up := time.Now()

	time.Sleep(5 * time.Second) // the load goes on while the queues and the senders catch up
	stopProducing()
	endedAll, _ := waiting()
	offered := float64(3*endedAll) / time.Since(producingFrom).Seconds()
	drained := time.Now().Add(60 * time.Second)
	for _, left := waiting(); left > 0 && time.Now().Before(drained); _, left = waiting() {
		time.Sleep(50 * time.Millisecond)
	}
	ended, left := waiting()
	assert.Zero(t, left, "the senders could not send what they had left within 60 s")
	stopHard()
	wg.Wait()
	stopSampling()
	got := r.WaitDelivered(t, l, up, 60*time.Second, false)
	total := time.Since(producingFrom)
	if got.LFLost > 0 || got.LSLost > 0 {
		sample() // where the undelivered spans sit
	}

	s := l.Stats()
	answers := l.Answers()
	require.NotEmpty(t, answers)
	took := make([]time.Duration, len(answers))
	refused, over := 0, 0
	for i, a := range answers {
		took[i] = a.Took
		if a.Status/100 != 2 {
			refused++
		}
		if a.Took > outageAnswerLimit {
			over++
		}
	}
	slices.Sort(took)
	q := func(p float64) time.Duration { return took[int(p*float64(len(took)-1))].Round(time.Millisecond) }
	slowest := took[len(took)-1]
	receiverRefused := counter(t, r.Metrics(t), "otelcol_receiver_refused_spans", `receiver="otlp"`)
	t.Logf("outage: %d answers (%d retryable refusals %v, %d permanent), answer time p50 %s p95 %s p99 %s max %s, %d over %s",
		len(took), refused, s.Refusals, s.Permanent, q(0.50), q(0.95), q(0.99), slowest.Round(time.Millisecond), over, outageAnswerLimit)
	t.Logf("outage: %d runs ended (%.0f spans/s offered), %.0f spans/s accepted before the outage; at its end queues langfuse %.0f / langsmith %.0f, %d runs waiting in the senders; receiver refused %.0f spans; delivered %s after the vendors came back; %s in all",
		ended, offered, steadyRate, lfQueue, lsQueue, backlog, receiverRefused,
		got.Recovery.Round(100*time.Millisecond), total.Round(time.Second))
	t.Logf("outage: %+v", got)

	assert.LessOrEqual(t, slowest, outageAnswerLimit, "%d of %d answers took longer than %s", over, len(took), outageAnswerLimit)
	assert.Equal(t, int64(3*ended), got.Sent, "every span the applications ended was accepted (refused ones were resent)")
	assert.Zero(t, s.Permanent, "no request refused for good")
	assert.Zero(t, got.LFLost, "spans lost at Langfuse")
	assert.Zero(t, got.LSLost, "runs lost at LangSmith")
	assert.Equal(t, got.SentTokens, got.LFTokens)
	assert.Equal(t, got.SentTokens, got.LSTokens)
	// Prometheus too: the token metrics counted each refused request beside the
	// exporter that refused it, and take its resend for a repeat
	promTokens := r.promTokens(t, float64(got.LFTokens))
	assert.Equal(t, float64(got.LFTokens), promTokens, "agentmeter_tokens_total (input + output) = the tokens Langfuse holds")
	assert.Positive(t, got.LFFaulted[503], "Langfuse refused during the outage")
	assert.Positive(t, got.LSFaulted[503], "LangSmith refused during the outage")
	r.AssertNoSecrets(t)
	ReliabilityRow(t, fmt.Sprintf("both vendors down (503) for %s of the shipped sidecar config, %d senders at %d spans/s (BatchSpanProcessor-sized requests, exponential backoff)", outageFor, outageSenders, outageSpansPerSecond),
		"the sending queues fill, then a full queue refuses the request retryably (503); the senders back off and resend, then catch up once the vendors are back",
		fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens), fmt.Sprintf("Langfuse %d / LangSmith %d", got.LFLost, got.LSLost),
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup), got.Recovery.Round(100*time.Millisecond).String(),
		fmt.Sprintf("%d answers, %d retryable refusals; answer time p50 %s, p95 %s, p99 %s, max %s", len(took), refused, q(0.50), q(0.95), q(0.99), slowest.Round(time.Millisecond)))
}

// promTokens is agentmeter_tokens_total's input and output tokens at the shipped
// config's prometheus exporter, once they equal want or 10 s passed (the connector
// emits every second).
func (r *FaultRig) promTokens(t *testing.T, want float64) float64 {
	t.Helper()
	var got float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m, err := faulty.Scrape(r.PromURL); err == nil {
			in, _ := m.Sum("agentmeter_tokens_total", `token_type="input"`)
			out, _ := m.Sum("agentmeter_tokens_total", `token_type="output"`)
			got = in + out
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sampleOutage logs, every 2 s until stopped, what the collector holds and what the
// senders wait with: the timeline a failed run is read by. sample logs one line now.
func (r *FaultRig) sampleOutage(t *testing.T, l *faulty.Load, waiting func() (ended, left int)) (stop, sample func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	began := time.Now()
	sample = func() {
		m, err := faulty.Scrape(r.MetricsURL)
		if err != nil {
			t.Logf("%5.1fs scrape: %v", time.Since(began).Seconds(), err)
			return
		}
		v := func(name string, labels ...string) string {
			if x, ok := m.Sum(name, labels...); ok {
				return fmt.Sprintf("%.0f", x)
			}
			return "-"
		}
		heap, _ := m.Sum("otelcol_process_runtime_heap_alloc_bytes")
		_, left := waiting()
		t.Logf("%5.1fs heap %.0f MiB, queues lf %s ls %s, held by the langsmith merge %s spans (%s refused downstream, waiting in its unsent queue), receiver accepted %s refused %s, sender accepted %d, waiting %d runs",
			time.Since(began).Seconds(), heap/(1<<20),
			v("otelcol_exporter_queue_size", `exporter="langfuse"`), v("otelcol_exporter_queue_size", `exporter="langsmith"`),
			v("otelcol_processor_subagentmerge_spans_buffered", `processor="subagentmerge/langsmith"`),
			v("otelcol_processor_subagentmerge_unsent_spans", `processor="subagentmerge/langsmith"`),
			v("otelcol_receiver_accepted_spans", `receiver="otlp"`), v("otelcol_receiver_refused_spans", `receiver="otlp"`),
			l.Stats().Spans, left)
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			sample()
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }, sample
}
