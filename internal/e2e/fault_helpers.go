//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// FaultDuration is how long each fault scenario keeps its fault on:
// $AGENTMETER_FAULT_DURATION (a Go duration; docs/reliability.md's figures are from a
// 30s run), 3s by default so `make test` stays bounded.
func FaultDuration(t testing.TB) time.Duration {
	t.Helper()
	v := os.Getenv("AGENTMETER_FAULT_DURATION")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("AGENTMETER_FAULT_DURATION=%q: want a positive Go duration like 30s", v)
	}
	return d
}

// Secrets the fault rig configures; every scenario scans logs and metrics for them.
const (
	faultLangfusePublic = "pk-lf-fault-public"
	faultLangfuseSecret = "sk-lf-fault-SECRET-7d1e"
	faultLangSmithKey   = "lsv2_pt_fault_SECRET_91ab"
)

// FaultRig is the ocb-built collector between a retrying OTLP sender and both vendor
// fakes (langfusefake, fakevendor.LangSmith), each behind a faulty.Front.
type FaultRig struct {
	t                testing.TB
	LF, LS           *faulty.Front
	LFFake           *langfusefake.Server
	LSFake           *fakevendor.LangSmith
	LFURL, LSURL     string
	Dir              string
	OTLP             string
	MetricsURL       string
	PromURL          string // the shipped config's prometheus exporter (startShipped)
	Pipeline         faulty.Pipeline
	Collector        *Collector
	logsOfEarlierRun []string
}

// FaultRigOptions tune the rig's collector.
type FaultRigOptions struct {
	ClientTimeout string // exporters' HTTP timeout (default 2s)
	LimitMiB      int    // memory_limiter's limit_mib; GOMEMLIMIT follows it as in deploy/
	SpikeMiB      int
	Persistent    bool   // file_storage queues
	SubagentMerge string // subagentmerge YAML body, "" for none
	NoLangSmith   bool
	NoLangfuse    bool
	Extra         map[string]string
	MaxElapsed    string // retry_on_failure.max_elapsed_time ("" : retry forever)
}

// newFaultFakes starts the vendor fakes and their faulty fronts (the fronts check the
// rig's keys and hand the fakes their own); the rig's collector is still to start.
func newFaultFakes(t *testing.T) *FaultRig {
	t.Helper()
	r := &FaultRig{t: t, Dir: t.TempDir()}
	r.LFFake = langfusefake.New(t)
	r.LSFake = fakevendor.NewLangSmith(faultLangSmithKey)
	t.Cleanup(r.LSFake.Close)
	return r.serveFronts(t, r.LFFake.Config.Handler, r.LSFake.Config.Handler)
}

// newFaultFronts is newFaultFakes with fronts that answer by themselves (LFFake and
// LSFake nil): they still decode every body and count what was accepted by id, but skip
// the fakes' checks, which at thousands of spans a second cost more CPU than the
// collector under test.
func newFaultFronts(t *testing.T) *FaultRig {
	t.Helper()
	r := &FaultRig{t: t, Dir: t.TempDir()}
	return r.serveFronts(t, nil, nil)
}

// serveFronts starts the faulty fronts before the inner handlers lf and ls (nil: none).
func (r *FaultRig) serveFronts(t *testing.T, lf, ls http.Handler) *FaultRig {
	t.Helper()
	r.LF = faulty.New(faulty.Langfuse, lf)
	r.LS = faulty.New(faulty.LangSmith, ls)
	r.LF.RotateKey(faulty.LangfuseAuth(faultLangfusePublic, faultLangfuseSecret),
		faulty.LangfuseAuth(langfusefake.DefaultPublicKey, langfusefake.DefaultSecretKey))
	r.LS.RotateKey(faultLangSmithKey, faultLangSmithKey)
	lfSrv, lsSrv := r.LF.Serve(), r.LS.Serve()
	t.Cleanup(lfSrv.Close)
	t.Cleanup(lsSrv.Close)
	r.LFURL, r.LSURL = lfSrv.URL, lsSrv.URL
	return r
}

// NewFaultRig starts the fakes, their fronts and the collector.
func NewFaultRig(t *testing.T, o FaultRigOptions) *FaultRig {
	t.Helper()
	LangfuseEnv(t)
	clearLangSmithEnv(t)
	if o.LimitMiB > 0 {
		// deploy/sidecar-pod.yaml pairs memory_limiter's 512 MiB with GOMEMLIMIT=600MiB, so
		// the Go runtime collects harder before the container limit; the rig keeps that
		// ratio (restarts inherit it too).
		t.Setenv("GOMEMLIMIT", fmt.Sprintf("%dMiB", o.LimitMiB*600/512))
	}
	r := newFaultFakes(t)

	r.OTLP = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	tel := FreePort(t)
	r.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", tel)
	timeout := o.ClientTimeout
	if timeout == "" {
		timeout = "2s"
	}
	r.Pipeline = faulty.Pipeline{
		OTLPAddr: r.OTLP, TelemetryPort: tel, ClientTimeout: timeout,
		LimitMiB: o.LimitMiB, SpikeMiB: o.SpikeMiB, SubagentMerge: o.SubagentMerge, ExtraExporters: o.Extra,
		MaxElapsed: o.MaxElapsed,
	}
	if !o.NoLangfuse {
		r.Pipeline.LangfuseURL, r.Pipeline.LangfusePublic, r.Pipeline.LangfuseSecret = r.LFURL, faultLangfusePublic, faultLangfuseSecret
	}
	if !o.NoLangSmith {
		r.Pipeline.LangSmithURL, r.Pipeline.LangSmithKey = r.LSURL, faultLangSmithKey
	}
	if o.Persistent {
		r.Pipeline.StorageDir = filepath.Join(r.Dir, "queue")
		if err := os.MkdirAll(r.Pipeline.StorageDir, 0o700); err != nil {
			t.Fatalf("storage dir: %v", err)
		}
	}
	r.Collector = StartIn(t, r.Dir, r.Pipeline.YAML(), r.OTLP)
	return r
}

// Restart starts a new collector process in the same folder (same persistent queue)
// after the previous one ended; cfg replaces the pipeline when set.
func (r *FaultRig) Restart(t *testing.T, p *faulty.Pipeline) {
	t.Helper()
	if p != nil {
		r.Pipeline = *p
	}
	r.logsOfEarlierRun = append(r.logsOfEarlierRun, r.Collector.Logs())
	r.Collector = StartIn(t, r.Dir, r.Pipeline.YAML(), r.OTLP)
}

// AllLogs is the output of every collector process the rig ran.
func (r *FaultRig) AllLogs() string {
	return strings.Join(append(append([]string(nil), r.logsOfEarlierRun...), r.Collector.Logs()), "\n")
}

// SteadyLoad starts a retrying sender at about 60 spans/s (2 runs every 100 ms).
func (r *FaultRig) SteadyLoad() (*faulty.Load, func()) {
	return r.LoadAt(100*time.Millisecond, 2, 0)
}

// SteadyPlacedLoad is SteadyLoad with every span carrying its LangSmith placement, as the
// agentmeter runtime's do: the shipped config sends them to LangSmith from its streamed
// branch.
func (r *FaultRig) SteadyPlacedLoad() (*faulty.Load, func()) {
	return r.loadAt(&faulty.Load{Addr: r.OTLP, TracesPerRequest: 2, Interval: 100 * time.Millisecond, Placed: true})
}

// LoadAt starts a retrying sender; stop ends it, abandoning a request still being
// refused (it was never accepted, so it is not counted as sent).
func (r *FaultRig) LoadAt(interval time.Duration, perRequest, pad int) (*faulty.Load, func()) {
	return r.loadAt(&faulty.Load{Addr: r.OTLP, TracesPerRequest: perRequest, Interval: interval, PadBytes: pad})
}

func (r *FaultRig) loadAt(l *faulty.Load) (*faulty.Load, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.Run(ctx, ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	r.t.Cleanup(stop)
	return l, stop
}

// Delivery is what the vendors hold of what a sender sent.
type Delivery struct {
	Sent, SentTokens                     int64
	LFAccepted, LFDup, LFLost, LFRefused int
	LSAccepted, LSDup, LSLost, LSRefused int
	LFTokens, LSTokens                   int64
	LFUnaccounted, LSUnaccounted         int // lost and not refused for good by the vendor
	// Items of requests the collector never acknowledged that a vendor holds anyway (a
	// request taken in just before a crash, or accepted by one pipeline and refused by
	// another, then abandoned by the sender). They are left out of Accepted and Tokens,
	// which count what the sender knows it sent.
	LFUnsure, LSUnsure   int
	Recovery             time.Duration
	LFFaulted, LSFaulted map[int]int
}

// missingIDs counts the ids of want a front never accepted, and of those the ones it
// never refused for good either.
func missingIDs(want map[string]bool, front *faulty.Front) (lost, unaccounted int) {
	got, refused := front.AcceptedIDs(), front.RefusedIDs()
	for id := range want {
		if got[id] == 0 {
			lost++
			if !refused[id] {
				unaccounted++
			}
		}
	}
	return lost, unaccounted
}

// WaitDelivered waits until every span the sender got accepted is accepted by each
// enabled vendor front, or was refused for good by it (allowRefused), or timeout; it
// returns the accounting, Recovery measured from since.
func (r *FaultRig) WaitDelivered(t testing.TB, l *faulty.Load, since time.Time, timeout time.Duration, allowRefused bool) Delivery {
	t.Helper()
	return r.WaitIDs(t, l, l.SpanIDs(), l.RunIDs(), since, timeout, allowRefused)
}

// WaitIDs is WaitDelivered for a snapshot of the sender's ids (e.g. those sent before a
// fault ended, while the load goes on).
func (r *FaultRig) WaitIDs(t testing.TB, l *faulty.Load, spans, runs map[string]bool, since time.Time, timeout time.Duration, allowRefused bool) Delivery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var d Delivery
	for {
		d = r.delivery(l, spans, runs)
		done := d.LFUnaccounted == 0 && d.LSUnaccounted == 0
		if !allowRefused {
			done = d.LFLost == 0 && d.LSLost == 0
		}
		if done {
			d.Recovery = time.Since(since)
			return d
		}
		if time.Now().After(deadline) {
			t.Errorf("after %s: %+v", timeout, d)
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *FaultRig) delivery(l *faulty.Load, spans, runs map[string]bool) Delivery {
	s := l.Stats()
	d := Delivery{Sent: int64(s.Spans), SentTokens: s.Tokens}
	unsureSpans, unsureRuns := l.Unsure()
	// The ids are read before the counters: a front only ever adds what it accepted, so
	// counters read after every id was found hold them all. Read the other way round, a
	// request accepted between the two reads (LangSmith's come 100 runs at a time) made a
	// delivery with nothing lost whose counts were short.
	if r.Pipeline.LangfuseURL != "" {
		d.LFLost, d.LFUnaccounted = missingIDs(spans, r.LF)
		st, n, tok := r.LF.StatsAndTokensOf(unsureSpans)
		d.LFAccepted, d.LFDup, d.LFTokens, d.LFRefused, d.LFFaulted = st.Accepted-n, st.Duplicates, st.Tokens-tok, st.Refused, st.Faulted
		d.LFUnsure = n
	}
	if r.Pipeline.LangSmithURL != "" {
		d.LSLost, d.LSUnaccounted = missingIDs(runs, r.LS)
		st, n, tok := r.LS.StatsAndTokensOf(unsureRuns)
		d.LSAccepted, d.LSDup, d.LSTokens, d.LSRefused, d.LSFaulted = st.Accepted-n, st.Duplicates, st.Tokens-tok, st.Refused, st.Faulted
		d.LSUnsure = n
	}
	return d
}

// Metrics scrapes the collector's own /metrics.
func (r *FaultRig) Metrics(t testing.TB) faulty.Metrics {
	t.Helper()
	m, err := faulty.Scrape(r.MetricsURL)
	if err != nil {
		t.Fatalf("collector metrics: %v", err)
	}
	return m
}

// AssertNoSecrets fails when a configured secret appears in any collector log line or
// in the collector's own metrics.
func (r *FaultRig) AssertNoSecrets(t testing.TB) {
	t.Helper()
	m, err := faulty.Scrape(r.MetricsURL)
	metrics := m.Raw
	if err != nil {
		metrics = "" // the collector may be stopped; its logs are still scanned
	}
	logs := r.AllLogs()
	for _, s := range []string{faultLangfuseSecret, faultLangSmithKey,
		faulty.LangfuseAuth(faultLangfusePublic, faultLangfuseSecret), strings.TrimPrefix(faulty.LangfuseAuth(faultLangfusePublic, faultLangfuseSecret), "Basic ")} {
		if strings.Contains(logs, s) {
			t.Errorf("a secret (%d chars) appears in the collector logs", len(s))
		}
		if strings.Contains(metrics, s) {
			t.Errorf("a secret (%d chars) appears in the collector's metrics", len(s))
		}
	}
	if len(logs) == 0 {
		t.Errorf("no collector logs captured: the secret scan saw nothing")
	}
}

// ReliabilityRow appends one docs/reliability.md table row to $AGENTMETER_RELIABILITY_REPORT
// (when set) and logs it.
func ReliabilityRow(t testing.TB, cells ...string) {
	t.Helper()
	row := "| " + strings.Join(cells, " | ") + " |"
	t.Log(row)
	path := os.Getenv("AGENTMETER_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	defer f.Close()
	fmt.Fprintln(f, row)
}

// faultedString renders fault counts by status (0 = reset), sorted.
func faultedString(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := fmt.Sprint(k)
		switch k {
		case faulty.ResetKey:
			name = "reset"
		case faulty.SlowKey:
			name = "slow"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, m[k]))
	}
	return strings.Join(parts, " ")
}
