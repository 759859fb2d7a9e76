//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

// The shipped otelcol-config.yaml as a sidecar runs it (ports moved, both vendors
// enabled by their environment variables against the fakes, its store in
// AGENTMETER_STORAGE_DIR), killed with SIGKILL twice under steady load from a retrying
// sender and restarted on the same store: every span the collector acknowledged reaches
// both vendors. What the dead process held (the merge's ledgers, both persistent
// sending queues) is picked up by the next; what was sent and still on disk at the crash
// arrives twice, counted as duplicates.
func TestReliabilityShippedConfigKill9Twice(t *testing.T) {
	r := newFaultFakes(t)
	start := startShipped(t, "agentmeter-kill9", r)
	start()
	l, stop := r.SteadyLoad()
	kill9Twice(t, r, start, l, stop, false, "kill -9 of the shipped sidecar config, twice under steady load (vendors on by env, against the fakes)")
}

// The same with spans that carry their LangSmith placement: LangSmith's runs go on as
// they come (the merge's ledgers, attrsplit/langsmith's list with, LangSmith's sending
// queue), and a crash there loses nothing acknowledged either.
func TestReliabilityShippedConfigKill9TwicePlaced(t *testing.T) {
	r := newFaultFakes(t)
	start := startShipped(t, "agentmeter-kill9-placed", r)
	start()
	l, stop := r.SteadyPlacedLoad()
	kill9Twice(t, r, start, l, stop, true, "the same, spans placed as the agentmeter runtime's (LangSmith fed as they come)")
}

// kill9Twice kills the collector twice while l sends, then checks that both vendors hold
// every acknowledged span, once, with its tokens, and that LangSmith got them by the
// branch their placement says.
func kill9Twice(t *testing.T, r *FaultRig, start func(), l *faulty.Load, stop func(), placed bool, row string) {
	d := FaultDuration(t)
	require.Eventually(t, func() bool { return r.LF.Stats().Accepted > 0 && r.LS.Stats().Accepted > 0 },
		60*time.Second, 50*time.Millisecond)
	began := time.Now()
	var held []float64
	for range 2 {
		time.Sleep(d / 2)
		held = append(held, counter(t, r.Metrics(t), "otelcol_processor_subagentmerge_ledger_traces", `processor="subagentmerge"`))
		r.Collector.Kill()
		r.logsOfEarlierRun = append(r.logsOfEarlierRun, r.Collector.Logs())
		time.Sleep(300 * time.Millisecond) // the sender meets a closed port and retries
		start()
	}
	time.Sleep(time.Second)
	stop()
	got := r.WaitDelivered(t, l, began, 2*time.Minute, false)
	t.Logf("shipped config, kill -9 x2: %+v; traces with a ledger at the crashes: %v", got, held)
	s := l.Stats()
	assert.Positive(t, s.Refusals[0], "the sender met the dead collector and retried")
	assert.Positive(t, held[0]+held[1], "the crashes hit runs the merge had ledgers of")
	assert.Zero(t, got.LFLost, "spans lost at Langfuse")
	assert.Zero(t, got.LSLost, "runs lost at LangSmith")
	assert.Equal(t, got.SentTokens, got.LFTokens)
	assert.Equal(t, got.SentTokens, got.LSTokens)
	// what the last process's split passed towards LangSmith: placed spans go on at
	// once, the others through the gather branch
	m := r.Metrics(t)
	placedIn := counter(t, m, "otelcol_connector_attrsplit_spans", `connector="attrsplit/langsmith"`, `route="with"`)
	heldIn := counter(t, m, "otelcol_connector_attrsplit_spans", `connector="attrsplit/langsmith"`, `route="without"`)
	if placed {
		assert.Positive(t, placedIn, "placed spans go on at once")
		assert.Zero(t, heldIn, "placed spans skip the gather branch")
	} else {
		assert.Zero(t, placedIn, "unplaced spans never go on before their trace is complete")
		assert.Positive(t, heldIn, "unplaced spans go by the gather branch")
	}
	r.AssertNoSecrets(t)
	ReliabilityRow(t, row,
		"merge ledgers and both sending queues on file_storage (AGENTMETER_STORAGE_DIR); the restarted process picks up what the killed one held; the sender retries while the port is closed",
		fmt.Sprintf("%d spans, %d tokens", got.Sent, got.SentTokens), fmt.Sprintf("Langfuse %d / LangSmith %d", got.LFLost, got.LSLost),
		fmt.Sprintf("%d / %d", got.LFDup, got.LSDup),
		fmt.Sprintf("traces with a ledger at the crashes: %.0f and %.0f", held[0], held[1]),
		fmt.Sprintf("sender retries while down: %d", s.Refusals[0]))
}

// startShipped points the shipped otelcol-config.yaml at the rig's fronts as a
// sidecar runs it: its ports moved, both vendors switched on by their environment
// variables (LangSmith project project), its store in AGENTMETER_STORAGE_DIR. start
// runs a collector on it (again after a crash: same store).
func startShipped(t *testing.T, project string, r *FaultRig) (start func()) {
	t.Helper()
	ports := setSidecarEnv(t)
	// delivery() reads which vendors are on from the pipeline description
	r.Pipeline.LangfuseURL, r.Pipeline.LangSmithURL = r.LFURL, r.LSURL
	LangfuseEnv(t, "LANGFUSE_TRACING", "true", "LANGFUSE_PUBLIC_KEY", faultLangfusePublic,
		"LANGFUSE_SECRET_KEY", faultLangfuseSecret, "LANGFUSE_BASE_URL", r.LFURL)
	clearLangSmithEnv(t)
	t.Setenv("LANGSMITH_TRACING", "true")
	t.Setenv("LANGSMITH_API_KEY", faultLangSmithKey)
	t.Setenv("LANGSMITH_ENDPOINT", r.LSURL)
	t.Setenv("LANGSMITH_PROJECT", project)
	r.OTLP = ports.OTLPHTTP
	r.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Telemetry)
	r.PromURL = "http://" + ports.Prometheus + "/metrics"
	shipped := filepath.Join(RepoRoot(), "otelcol-config.yaml")
	return func() { r.Collector = StartWithArgs(t, r.Dir, ports.OTLPHTTP, "--config", shipped) }
}
