//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/bench/agentrun"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// How long a span waits in the sidecar before a vendor has it: a real-time replay of agent
// runs, each span sent the moment it ends in a request of its own (OTLP/HTTP), into the
// shipped otelcol-config.yaml with both vendor exporters on towards the LangSmith and
// Langfuse fakes on loopback, and into a stock collector (otlp → memory_limiter → batch →
// otlphttp with a file_storage queue) towards the Langfuse fake's OTLP endpoint. A span's
// latency is from the moment its request was sent until the fake first holds it (polled
// every 10 ms); for the shipped sidecar it is the later of the two vendors.
//
// DeerFlow-shaped runs (bench/agentrun) give the p50/p95 rows; runs whose `task` is never
// traced (OpenLLMetry-shaped) give untraced_out_s: how long after its root was sent the
// last span of such a run was at every vendor. A span not out when the wait ends counts
// as the wait (a lower bound), and unseen says how many there were.
//
//	AGENTMETER_COLLECTOR=$PWD/bin/agentmeter-collector go test -tags e2e ./internal/e2e -run '^$' -bench SidecarLatency -benchtime 1x
//
// Sizes from the environment: BENCH_LATENCY_RUNS (DeerFlow runs, default 8),
// BENCH_LATENCY_UNTRACED (untraced-task runs, 2), BENCH_LATENCY_RUN (each run's length,
// 30s), BENCH_LATENCY_STAGGER (between run starts, 1s), BENCH_LATENCY_WAIT (after the last
// send, 40s). The DeerFlow-shaped runs carry the LangSmith placement the agentmeter
// runtime puts on its spans (agentrun.Run.Place); BENCH_LATENCY_UNPLACED=1 sends them
// without it, as another emitter of the same runs would.
func BenchmarkSidecarLatency(b *testing.B) {
	p := latencyParamsFromEnv(b)
	b.Run("shipped", func(b *testing.B) {
		for range b.N {
			ports := setSidecarEnv(b)
			lf := langfusefake.New(b)
			ls := fakevendor.NewLangSmith("lsv2_pt_bench")
			b.Cleanup(ls.Close)
			b.Setenv("LANGFUSE_TRACING", "true")
			b.Setenv("LANGFUSE_PUBLIC_KEY", lf.PublicKey)
			b.Setenv("LANGFUSE_SECRET_KEY", lf.SecretKey)
			b.Setenv("LANGFUSE_BASE_URL", lf.URL)
			b.Setenv("LANGSMITH_TRACING", "true")
			b.Setenv("LANGSMITH_API_KEY", ls.APIKey)
			b.Setenv("LANGSMITH_ENDPOINT", ls.URL)
			b.Setenv("LANGSMITH_PROJECT", "bench")
			StartWithArgs(b, b.TempDir(), ports.OTLPHTTP, "--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"))
			res := replay(b, p, ports.OTLPHTTP, vendorSink{"langfuse", langfuseSeen(lf)}, vendorSink{"langsmith", langsmithSeen(ls)})
			res.report(b)
			// a run tree LangSmith would not accept (a dotted order that does not extend its
			// parent's, a parent never received) is counted, not failed: spans sent as they
			// end reach the exporter children first
			v := ls.Violations()
			b.ReportMetric(float64(len(v)), "langsmith_violations")
			for _, x := range v[:min(3, len(v))] {
				b.Logf("langsmith fake: %s", x)
			}
		}
	})
	b.Run("stock", func(b *testing.B) {
		for range b.N {
			lf := langfusefake.New(b)
			otlp := FreeAddr(b)
			dir := b.TempDir()
			auth := base64.StdEncoding.EncodeToString([]byte(lf.PublicKey + ":" + lf.SecretKey))
			Start(b, fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      http: {endpoint: %q}
processors:
  memory_limiter: {check_interval: 1s, limit_mib: 512, spike_limit_mib: 128}
  batch: {}
exporters:
  otlphttp:
    traces_endpoint: %q
    headers: {Authorization: "Basic %s", x-langfuse-ingestion-version: "4"}
    sending_queue: {storage: file_storage}
extensions:
  file_storage: {directory: %q, create_directory: true}
service:
  extensions: [file_storage]
  telemetry: {metrics: {level: none}, logs: {level: warn}}
  pipelines:
    traces: {receivers: [otlp], processors: [memory_limiter, batch], exporters: [otlphttp]}
`, otlp, lf.URL+langfusefake.TracesPath, auth, filepath.Join(dir, "storage")), otlp)
			res := replay(b, p, otlp, vendorSink{"langfuse", langfuseSeen(lf)})
			res.report(b)
		}
	})
}

type latencyParams struct {
	runs, untraced      int
	run, stagger, wait  time.Duration
	pollEvery, sendWait time.Duration
	unplaced            bool // DeerFlow-shaped runs without the runtime's LangSmith placement
}

func latencyParamsFromEnv(b *testing.B) latencyParams {
	p := latencyParams{runs: 8, untraced: 2, run: 30 * time.Second, stagger: time.Second, wait: 40 * time.Second,
		pollEvery: 10 * time.Millisecond, sendWait: 30 * time.Second}
	ints := map[string]*int{"BENCH_LATENCY_RUNS": &p.runs, "BENCH_LATENCY_UNTRACED": &p.untraced}
	for k, dst := range ints {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(b, err, k)
			*dst = n
		}
	}
	durs := map[string]*time.Duration{"BENCH_LATENCY_RUN": &p.run, "BENCH_LATENCY_STAGGER": &p.stagger, "BENCH_LATENCY_WAIT": &p.wait}
	for k, dst := range durs {
		if v := os.Getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			require.NoError(b, err, k)
			*dst = d
		}
	}
	require.Positive(b, p.runs+p.untraced, "BENCH_LATENCY_RUNS + BENCH_LATENCY_UNTRACED")
	p.unplaced = os.Getenv("BENCH_LATENCY_UNPLACED") == "1"
	return p
}

// seenFunc reports, for every span a vendor fake holds so far, its key (spanKey).
type seenFunc func(yield func(key string))

// vendorSink is one vendor fake the replay watches; name goes into the metric units.
type vendorSink struct {
	name string
	seen seenFunc
}

func spanKey(tid pcommon.TraceID, sid pcommon.SpanID) string {
	return tid.String() + "/" + sid.String()
}

// langfuseSeen reads the observations the fake ingested (their ids are the span ids).
func langfuseSeen(lf *langfusefake.Server) seenFunc {
	return func(yield func(string)) {
		for _, o := range lf.Observations() {
			yield(o.TraceID + "/" + o.ID)
		}
	}
}

// langsmithSeen reads the runs the fake accepted. A run's id is the span id as a UUID's
// last 8 bytes, the root's is the trace id (docs/langsmith.md); the key is rebuilt from
// trace_id and id.
func langsmithSeen(ls *fakevendor.LangSmith) seenFunc {
	return func(yield func(string)) {
		for id, run := range ls.Runs() {
			tid, _ := run["trace_id"].(string)
			t, s := uuidHex(tid), uuidHex(id)
			if t == "" || s == "" {
				continue
			}
			if s == t {
				yield(t + "/root")
				continue
			}
			yield(t + "/" + s[16:])
		}
	}
}

func uuidHex(u string) string {
	if len(u) != 36 {
		return ""
	}
	h := u[0:8] + u[9:13] + u[14:18] + u[19:23] + u[24:]
	if _, err := hex.DecodeString(h); err != nil {
		return ""
	}
	return h
}

// sentSpan is one span of the replay: when its request went out.
type sentSpan struct {
	key, rootKey string // rootKey: how a LangSmith-keyed sink names it if it is the root
	run          int
	untraced     bool
	root         bool
	at           time.Time
}

type latencyResult struct {
	spans   []sentSpan
	outAt   []time.Time // per span, when the last sink had it (zero: never)
	sinks   []string
	sinkAt  [][]time.Time // per sink, per span: when that sink had it (zero: never)
	waitEnd time.Time
	runs    int
}

// replay sends the runs in real time to the collector's OTLP/HTTP address and watches
// every sink until each holds every span, or the wait after the last send ends.
func replay(b *testing.B, p latencyParams, otlp string, sinks ...vendorSink) latencyResult {
	b.Helper()
	type planned struct {
		run      agentrun.Run
		untraced bool
		offset   time.Duration
	}
	rnd := rand.New(rand.NewPCG(27, 1))
	var plan []planned
	for i := range p.runs + p.untraced {
		untraced := i >= p.runs
		var r agentrun.Run
		if untraced {
			r = agentrun.Untraced(rnd, uint64(i+1))
		} else {
			r = agentrun.New(rnd, uint64(i+1))
		}
		plan = append(plan, planned{run: r, untraced: untraced, offset: time.Duration(i) * p.stagger})
	}

	var mu sync.Mutex // guards spans and firstSeen
	var spans []sentSpan
	firstSeen := make([]map[string]time.Time, len(sinks))
	for i := range firstSeen {
		firstSeen[i] = map[string]time.Time{}
	}
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(p.pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopPoll:
				return
			case <-tick.C:
			}
			now := time.Now()
			for i, sk := range sinks {
				var keys []string
				sk.seen(func(k string) { keys = append(keys, k) })
				mu.Lock()
				for _, k := range keys {
					if _, ok := firstSeen[i][k]; !ok {
						firstSeen[i][k] = now
					}
				}
				mu.Unlock()
			}
		}
	}()

	b.ResetTimer()
	t0 := time.Now().Add(200 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, len(plan))
	for ri, pl := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := t0.Add(pl.offset)
			ends := pl.run.Retime(start, p.run)
			if !pl.untraced && !p.unplaced {
				pl.run.Place() // as the agentmeter runtime emits them
			}
			tid := pl.run.TraceID()
			for i, sp := range pl.run.Spans {
				time.Sleep(time.Until(start.Add(ends[i])))
				td := ptrace.NewTraces()
				rs := td.ResourceSpans().AppendEmpty()
				rs.Resource().Attributes().PutStr(genai.AttrServiceName, "deer-flow")
				sp.CopyTo(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
				s := sentSpan{key: spanKey(tid, sp.SpanID()), rootKey: tid.String() + "/root",
					run: ri, untraced: pl.untraced, root: i == len(pl.run.Spans)-1, at: time.Now()}
				ctx, cancel := context.WithTimeout(context.Background(), p.sendWait)
				err := SendOTLPHTTP(ctx, otlp, td)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("run %d span %d: %w", ri, i, err)
					return
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}

	// seenAt is when sink i had span s (zero: not yet)
	seenAt := func(i int, s sentSpan) time.Time {
		at, ok := firstSeen[i][s.key]
		if !ok && s.root {
			at = firstSeen[i][s.rootKey]
		}
		return at
	}
	res := latencyResult{spans: spans, outAt: make([]time.Time, len(spans)), runs: len(plan)}
	for _, sk := range sinks {
		res.sinks = append(res.sinks, sk.name)
		res.sinkAt = append(res.sinkAt, make([]time.Time, len(spans)))
	}
	for deadline := time.Now().Add(p.wait); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		missing := 0
		for j, s := range spans {
			var last time.Time // when the last sink had it
			for i := range sinks {
				at := seenAt(i, s)
				res.sinkAt[i][j] = at
				if at.IsZero() {
					last = time.Time{}
					break
				}
				if at.After(last) {
					last = at
				}
			}
			if res.outAt[j] = last; last.IsZero() {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	res.waitEnd = time.Now()
	close(stopPoll)
	<-polled
	b.StopTimer()
	return res
}

// report puts the figures on the benchmark line: p50_s, p95_s, max_s over the spans of
// the DeerFlow-shaped runs, and p95_<vendor>_s at each vendor alone; untraced_out_s, the
// latest of the untraced-task runs' last span out after its root was sent; unseen, spans
// not out when the wait ended (each counted as that wait).
func (r latencyResult) report(b *testing.B) {
	var lat []float64
	unseen := 0
	lastOut := map[int]time.Time{}
	rootAt := map[int]time.Time{}
	for i, s := range r.spans {
		at := r.outAt[i]
		if at.IsZero() {
			unseen++
			at = r.waitEnd
		}
		if s.untraced {
			if at.After(lastOut[s.run]) {
				lastOut[s.run] = at
			}
			if s.root {
				rootAt[s.run] = s.at
			}
			continue
		}
		lat = append(lat, at.Sub(s.at).Seconds())
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(percentile(lat, 0.50), "p50_s")
		b.ReportMetric(percentile(lat, 0.95), "p95_s")
		b.ReportMetric(lat[len(lat)-1], "max_s")
	}
	var untraced float64
	for run, root := range rootAt {
		untraced = max(untraced, lastOut[run].Sub(root).Seconds())
	}
	if len(rootAt) > 0 {
		b.ReportMetric(untraced, "untraced_out_s")
	}
	for i, name := range r.sinks {
		var at []float64
		for j, s := range r.spans {
			if s.untraced {
				continue
			}
			t := r.sinkAt[i][j]
			if t.IsZero() {
				t = r.waitEnd
			}
			at = append(at, t.Sub(s.at).Seconds())
		}
		slices.Sort(at)
		b.ReportMetric(percentile(at, 0.95), "p95_"+name+"_s")
	}
	b.ReportMetric(float64(unseen), "unseen")
	b.ReportMetric(float64(len(r.spans)), "spans")
	b.Logf("%d runs, %d spans sent one request each; %d not out when the wait ended", r.runs, len(r.spans), unseen)
}

// percentile of sorted xs (nearest rank).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
