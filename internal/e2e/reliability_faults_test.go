//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// Each vendor fault alone, at both vendors at once, for FaultDuration during steady load;
// then the fault ends and the suite waits until every span the collector accepted is at
// both vendors. Retryable faults lose nothing: the loss is asserted to be exactly zero.
// 413 is split and retried by both exporters (halves until each fits, only retryable
// parts retried), so the 413 row asserts zero loss at both vendors too.
func TestReliabilityVendorFaults(t *testing.T) {
	d := FaultDuration(t)
	cases := []struct {
		name     string
		fault    faulty.Fault
		lsFault  *faulty.Fault // when the LangSmith face gets a different fault
		what     string
		wantDups bool
	}{
		{name: "429_retry_after", fault: faulty.Fault{Kind: faulty.Status, Status: 429, RetryAfter: "1"},
			what: "retryable; the exporter waits Retry-After (1 s) between attempts, data waits in the queue"},
		{name: "5xx_burst", fault: faulty.Fault{Kind: faulty.Status, Status: 503},
			what: "retryable; exponential backoff (100 ms to 1 s), data waits in the queue"},
		{name: "slow_past_timeout", fault: faulty.Fault{Kind: faulty.Slow, Delay: 3 * time.Second},
			what: "client timeout (2 s) -> retried; the vendor ingested the first copy too -> duplicates (same span/run id, vendors upsert)", wantDups: true},
		{name: "reset_mid_body", fault: faulty.Fault{Kind: faulty.Reset},
			what: "connection reset while the body is sent -> network error, retried"},
		{name: "413_over_5_spans", fault: faulty.Fault{Kind: faulty.TooLarge, MaxItems: 5},
			what: "both exporters halve the request until it fits and resend only what failed retryably: nothing dropped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewFaultRig(t, FaultRigOptions{})
			l, stop := r.SteadyLoad()
			require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
				60*time.Second, 50*time.Millisecond, "steady state before the fault")

			lsFault := tc.fault
			if tc.lsFault != nil {
				lsFault = *tc.lsFault
			}
			r.LF.Set(tc.fault)
			r.LS.Set(lsFault)
			time.Sleep(d)
			r.LF.Clear()
			r.LS.Clear()
			cleared := time.Now()
			// recovery: until the backlog of the fault window is at the vendors, while the
			// load goes on
			backlog := r.WaitIDs(t, l, l.SpanIDs(), l.RunIDs(), cleared, 2*time.Minute+3*d, false)
			time.Sleep(500 * time.Millisecond)
			stop()
			got := r.WaitDelivered(t, l, cleared, 2*time.Minute, false)
			got.Recovery = backlog.Recovery
			t.Logf("%s: %+v", tc.name, got)
			require.Positive(t, got.Sent)
			assert.NotEmpty(t, got.LFFaulted, "the Langfuse fault was hit")
			assert.NotEmpty(t, got.LSFaulted, "the LangSmith fault was hit")
			assert.Zero(t, got.LFLost, "spans lost at Langfuse")
			assert.Equal(t, got.SentTokens, got.LFTokens, "tokens at Langfuse")
			assert.Zero(t, got.LSUnaccounted, "runs lost at LangSmith without a refusal")
			assert.Zero(t, got.LSLost, "runs lost at LangSmith")
			assert.Equal(t, got.SentTokens, got.LSTokens, "tokens at LangSmith")
			if tc.wantDups {
				assert.Positive(t, got.LFDup+got.LSDup, "a slow vendor that ingests after the client timeout gets the retry as a duplicate")
			}
			assert.Empty(t, r.LFFake.Problems(), "Langfuse fake's checks")
			assert.Empty(t, r.LSFake.Violations(), "LangSmith fake's checks")
			r.AssertNoSecrets(t)

			ReliabilityRow(t, tc.fault.String()+fmt.Sprintf(" for %s", d), tc.what,
				fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens),
				fmt.Sprintf("Langfuse %d / LangSmith %d", got.LFLost, got.LSLost),
				fmt.Sprintf("%d / %d", got.LFDup, got.LSDup),
				got.Recovery.Round(100*time.Millisecond).String(),
				fmt.Sprintf("LF %s; LS %s", faultedString(got.LFFaulted), faultedString(got.LSFaulted)))
		})
	}
}

// 401 after a key rotation: both exporters treat 401 as a permanent error (retrying with
// the same key cannot succeed), so what they send while the collector still has the old
// key is dropped, logged and counted; once the collector restarts with the new key,
// everything sent after that arrives. The suite asserts the loss is exactly the spans the
// vendor refused, and that the collector's failed-send counter says so too.
func TestReliabilityKeyRotation(t *testing.T) {
	d := FaultDuration(t)
	r := NewFaultRig(t, FaultRigOptions{})
	l, stop := r.SteadyLoad()
	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)

	// the keys are rotated at the vendors: the collector's are now refused
	const newSecret, newLSKey = "sk-lf-rotated-SECRET-2b9c", "lsv2_pt_rotated_SECRET_55aa"
	r.LF.RotateKey(faulty.LangfuseAuth(faultLangfusePublic, newSecret),
		faulty.LangfuseAuth(langfusefake.DefaultPublicKey, langfusefake.DefaultSecretKey))
	r.LS.RotateKey(newLSKey, faultLangSmithKey)
	rotated := time.Now()
	time.Sleep(d)
	stop()
	// let the exporters try (and fail) what they hold: every span is then either at the
	// vendor or counted as failed by the collector
	var failedLF, failedLS float64
	require.Eventually(t, func() bool {
		m := r.Metrics(t)
		d := r.delivery(l, l.SpanIDs(), l.RunIDs())
		var okLF, okLS bool
		failedLF, okLF = counterOK(m, "otelcol_exporter_send_failed_spans", `exporter="langfuse"`)
		failedLS, okLS = counterOK(m, "otelcol_exporter_send_failed_spans", `exporter="langsmith"`)
		queued, okQ := m.Sum("otelcol_exporter_queue_size")
		return okLF && okLS && okQ && queued == 0 && failedLF == float64(d.LFLost) && failedLS == float64(d.LSLost)
	}, 60*time.Second, 100*time.Millisecond, "every span delivered or counted as failed")
	logs := r.Collector.Logs()
	assert.Contains(t, logs, "langfuse rejected the credentials (HTTP 401)")
	assert.Contains(t, logs, "HTTP 401")

	// the operator rolls the new keys out: the collector restarts with them
	r.Collector.Stop()
	p := r.Pipeline
	p.LangfuseSecret, p.LangSmithKey = newSecret, newLSKey
	r.Restart(t, &p)
	restarted := time.Now()
	l2, stop2 := r.SteadyLoad()
	time.Sleep(time.Second)
	stop2()

	before := r.WaitDelivered(t, l, rotated, time.Minute, true)
	after := r.WaitDelivered(t, l2, restarted, time.Minute, false)
	t.Logf("during rotation: %+v; after the restart: %+v", before, after)
	assert.Positive(t, before.LFRefused, "spans refused with 401 by Langfuse")
	assert.Positive(t, before.LSRefused, "runs refused with 401 by LangSmith")
	assert.Zero(t, before.LFUnaccounted, "every Langfuse loss is a 401 refusal")
	assert.Zero(t, before.LSUnaccounted, "every LangSmith loss is a 401 refusal")
	assert.Equal(t, float64(before.LFLost), failedLF, "the collector counts the dropped spans (langfuse)")
	assert.Equal(t, float64(before.LSLost), failedLS, "the collector counts the dropped runs (langsmith)")
	assert.Zero(t, after.LFLost)
	assert.Zero(t, after.LSLost)
	r.AssertNoSecrets(t)
	for _, s := range []string{newSecret, newLSKey} {
		assert.NotContains(t, r.AllLogs(), s)
	}
	ReliabilityRow(t, fmt.Sprintf("401 after key rotation, %s until the collector restarts with the new keys", d),
		"permanent error (same key cannot succeed): the exporters drop the batch, log an error naming the setting (never the key) and count it in otelcol_exporter_send_failed_spans; nothing is retried",
		fmt.Sprintf("%d spans before the restart (the rotation came after the first ones), %d after", before.Sent, after.Sent),
		fmt.Sprintf("during: Langfuse %d, LangSmith %d (= the vendor's 401 refusals and the collector's failed-send counters); after: 0 / 0", before.LFLost, before.LSLost),
		fmt.Sprintf("%d / %d", after.LFDup, after.LSDup),
		after.Recovery.Round(100*time.Millisecond).String()+" after the restart",
		fmt.Sprintf("LF %s; LS %s", faultedString(before.LFFaulted), faultedString(before.LSFaulted)))
}

// A Retry-After longer than retry_on_failure.max_elapsed_time (default 5m in both
// exporters): exporterhelper gives up at once ("no more retries left") and the batch is
// dropped, although the error is retryable. Shown with max_elapsed_time 2s and
// Retry-After 5; the loss is exactly the spans of the throttled requests, and the
// collector counts them as failed. The suite's other scenarios (and docs/reliability.md's
// recommended settings) use max_elapsed_time: 0s, which never gives up.
func TestReliabilityRetryAfterPastMaxElapsed(t *testing.T) {
	r := NewFaultRig(t, FaultRigOptions{MaxElapsed: "2s"})
	l, stop := r.SteadyLoad()
	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)
	r.LF.Set(faulty.Fault{Kind: faulty.Status, Status: 429, RetryAfter: "5"})
	r.LS.Set(faulty.Fault{Kind: faulty.Status, Status: 429, RetryAfter: "5"})
	time.Sleep(time.Second)
	r.LF.Clear()
	r.LS.Clear()
	time.Sleep(500 * time.Millisecond)
	stop()
	// wait until every span is either at the vendor or counted as failed
	var got Delivery
	var failedLF, failedLS float64
	require.Eventually(t, func() bool {
		got = r.delivery(l, l.SpanIDs(), l.RunIDs())
		m := r.Metrics(t)
		var okLF, okLS bool
		failedLF, okLF = counterOK(m, "otelcol_exporter_send_failed_spans", `exporter="langfuse"`)
		failedLS, okLS = counterOK(m, "otelcol_exporter_send_failed_spans", `exporter="langsmith"`)
		queued, okQ := m.Sum("otelcol_exporter_queue_size")
		return okLF && okLS && okQ && queued == 0 &&
			float64(got.LFAccepted)+failedLF == float64(got.Sent) && float64(got.LSAccepted)+failedLS == float64(got.Sent)
	}, time.Minute, 100*time.Millisecond, "every span delivered or counted as failed")
	t.Logf("Retry-After past max_elapsed_time: %+v; failed: langfuse %.0f, langsmith %.0f", got, failedLF, failedLS)
	assert.Positive(t, got.LFLost, "the throttled batches are dropped")
	assert.Positive(t, got.LSLost)
	assert.Equal(t, float64(got.LFLost), failedLF, "every lost span is counted as failed (langfuse)")
	assert.Equal(t, float64(got.LSLost), failedLS, "every lost run is counted as failed (langsmith)")
	assert.Contains(t, r.Collector.Logs(), "no more retries left")
	r.AssertNoSecrets(t)
	ReliabilityRow(t, "429 with Retry-After 5 s > retry_on_failure.max_elapsed_time 2 s (1 s of throttling)",
		"exporterhelper gives up at once (`no more retries left`): the throttled batches are dropped, logged and counted in otelcol_exporter_send_failed_spans. Set max_elapsed_time: 0s (or above the longest Retry-After) with a persistent queue",
		fmt.Sprintf("%d spans", got.Sent), fmt.Sprintf("Langfuse %d / LangSmith %d (= failed-send counters)", got.LFLost, got.LSLost),
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup), "none for the dropped data",
		fmt.Sprintf("LF %s; LS %s", faultedString(got.LFFaulted), faultedString(got.LSFaulted)))
}
