// Command soak drives the ocb-built collector at a steady rate for a long time (an hour
// by default) through both vendor exporters, each behind a fault-injecting fake vendor
// (internal/fakevendor/faulty), and prints every -every: the collector's RSS, its
// exporters' queue sizes, spans sent, spans each vendor accepted, duplicates and loss.
// At the end it stops the load, waits for the queues to drain and exits non-zero when
// any accepted span is missing at a vendor. bench/soak.sh is the entry point.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/agentmeter/agentmeter/internal/childproc"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

func main() {
	var (
		bin       = flag.String("collector", "bin/agentmeter-collector", "ocb-built collector binary")
		duration  = flag.Duration("duration", time.Hour, "how long to send")
		every     = flag.Duration("every", time.Minute, "report interval")
		rate      = flag.Int("rate", 100, "agent runs per second (3 spans each)")
		perReq    = flag.Int("per-request", 10, "runs per OTLP request")
		limitMiB  = flag.Int("limit-mib", 256, "memory_limiter limit_mib")
		faultEach = flag.Duration("fault-every", 0, "when set, a 503 outage of -fault-for at each vendor this often")
		faultFor  = flag.Duration("fault-for", 10*time.Second, "length of each outage")
		drain     = flag.Duration("drain", 2*time.Minute, "longest wait for the queues to drain at the end")
		workDir   = flag.String("dir", "", "working folder (default: a temporary one, removed at the end)")
	)
	flag.Parse()
	if err := run(*bin, *duration, *every, *rate, *perReq, *limitMiB, *faultEach, *faultFor, *drain, *workDir); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(bin string, duration, every time.Duration, rate, perReq, limitMiB int, faultEvery, faultFor, drain time.Duration, dir string) error {
	if rate < 1 || perReq < 1 {
		return fmt.Errorf("-rate and -per-request must be positive")
	}
	dir, cleanup, err := childproc.WorkDir(dir, "agentmeter-soak-")
	if err != nil {
		return err
	}
	defer cleanup()
	bin, err = filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("collector path: %w", err)
	}
	storage := filepath.Join(dir, "queue")
	if err := os.MkdirAll(storage, 0o700); err != nil {
		return fmt.Errorf("storage dir: %w", err)
	}
	// the fronts answer by themselves: the vendor fakes' schema checks would cost more CPU
	// than the collector under test on a small machine
	lf := faulty.New(faulty.Langfuse, nil)
	ls := faulty.New(faulty.LangSmith, nil)
	lfSrv, lsSrv := lf.Serve(), ls.Serve()
	defer lfSrv.Close()
	defer lsSrv.Close()

	otlpPort, err := childproc.FreePort()
	if err != nil {
		return err
	}
	telPort, err := childproc.FreePort()
	if err != nil {
		return err
	}
	otlp := fmt.Sprintf("127.0.0.1:%d", otlpPort)
	cfg := faulty.Pipeline{
		OTLPAddr: otlp, TelemetryPort: telPort, StorageDir: storage,
		LangfuseURL: lfSrv.URL, LangfusePublic: "pk-lf-soak", LangfuseSecret: "sk-lf-soak-secret",
		LangSmithURL: lsSrv.URL, LangSmithKey: "lsv2_pt_soak_secret", ClientTimeout: "5s", LimitMiB: limitMiB,
	}.YAML()
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	logPath := filepath.Join(dir, "collector.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("collector log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.Env = childproc.EnvWithout(childproc.VendorEnv...)
	col, err := childproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("start collector: %w", err)
	}
	defer col.Stop(30 * time.Second)
	if err := col.WaitReady(context.Background(), 60*time.Second, func() bool { return childproc.Listening(otlp) }); err != nil {
		return fmt.Errorf("collector on %s: %w", otlp, err)
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", telPort)

	interval := time.Second * time.Duration(perReq) / time.Duration(rate)
	load := &faulty.Load{Addr: otlp, TracesPerRequest: perReq, Interval: interval, Client: &http.Client{Timeout: 30 * time.Second}}
	sendCtx, stopSending := context.WithTimeout(context.Background(), duration)
	defer stopSending()
	hardStop, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	loadDone := make(chan struct{})
	go func() { load.Run(sendCtx, hardStop); close(loadDone) }()

	fmt.Printf("soak: %d runs/s (%d spans/s) for %s, memory_limiter %d MiB, queues on disk in %s\n",
		rate, 3*rate, duration, limitMiB, storage)
	fmt.Printf("%8s %8s %8s %8s %9s %9s %9s %6s %6s %6s %6s %7s\n",
		"elapsed", "rss_mib", "peak_mib", "heap_mib", "sent", "lf_acc", "ls_acc", "lf_q", "ls_q", "lf_dup", "ls_dup", "refused")
	start := time.Now()
	var peak int64
	report := func() {
		rss, _ := faulty.RSS(cmd.Process.Pid)
		peak = max(peak, rss)
		m, _ := faulty.Scrape(metricsURL)
		s, a, b := load.Stats(), lf.Stats(), ls.Stats()
		heap, _ := m.Sum("otelcol_process_runtime_heap_alloc_bytes")
		qLF, qLS := queues(m)
		var refused int
		for _, n := range s.Refusals {
			refused += n
		}
		fmt.Printf("%8s %8.1f %8.1f %8.1f %9d %9d %9d %6.0f %6.0f %6d %6d %7d\n",
			time.Since(start).Round(time.Second), float64(rss)/(1<<20), float64(peak)/(1<<20),
			heap/(1<<20), s.Spans, a.Accepted, b.Accepted, qLF, qLS,
			a.Duplicates, b.Duplicates, refused)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var faultTick <-chan time.Time
	if faultEvery > 0 {
		ft := time.NewTicker(faultEvery)
		defer ft.Stop()
		faultTick = ft.C
	}
	sampleRSS := time.NewTicker(time.Second)
	defer sampleRSS.Stop()
loop:
	for {
		select {
		case <-tick.C:
			report()
		case <-sampleRSS.C:
			if rss, err := faulty.RSS(cmd.Process.Pid); err == nil {
				peak = max(peak, rss)
			}
		case <-faultTick:
			lf.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
			ls.Set(faulty.Fault{Kind: faulty.Status, Status: 503})
			time.AfterFunc(faultFor, func() {
				lf.Clear()
				ls.Clear()
				// the backlog the outage left, and how long the queues take to empty
				ended := time.Now()
				m, _ := faulty.Scrape(metricsURL)
				qLF, qLS := queues(m)
				fmt.Printf("%8s outage of %s ended: queues langfuse %.0f, langsmith %.0f requests\n", time.Since(start).Round(time.Second), faultFor, qLF, qLS)
				for time.Since(ended) < every {
					m, err := faulty.Scrape(metricsURL)
					if q, found := m.Sum("otelcol_exporter_queue_size"); err == nil && found && q == 0 {
						fmt.Printf("%8s queues empty %s after the outage\n", time.Since(start).Round(time.Second), time.Since(ended).Round(100*time.Millisecond))
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		case <-col.Done():
			return fmt.Errorf("collector exited during the soak: %v (log: %s)", col.Err(), logPath)
		case <-loadDone:
			break loop
		}
	}
	lf.Clear()
	ls.Clear()

	// drain: every span the collector accepted must reach both vendors
	want, wantRuns := load.SpanIDs(), load.RunIDs()
	deadline := time.Now().Add(drain)
	drainStart := time.Now()
	var lostLF, lostLS int
	for {
		lostLF, lostLS = missing(want, lf.AcceptedIDs()), missing(wantRuns, ls.AcceptedIDs())
		if (lostLF == 0 && lostLS == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	report()
	s, a, b := load.Stats(), lf.Stats(), ls.Stats()
	fmt.Printf("soak: drained in %s; sent %d spans (%d tokens); langfuse accepted %d (%d tokens, %d duplicates), lost %d; "+
		"langsmith accepted %d (%d tokens, %d duplicates), lost %d; peak RSS %.1f MiB; sender refusals %v\n",
		time.Since(drainStart).Round(100*time.Millisecond), s.Spans, s.Tokens, a.Accepted, a.Tokens, a.Duplicates, lostLF,
		b.Accepted, b.Tokens, b.Duplicates, lostLS, float64(peak)/(1<<20), s.Refusals)
	if lostLF != 0 || lostLS != 0 || a.Tokens != s.Tokens || b.Tokens != s.Tokens {
		return fmt.Errorf("loss: langfuse %d spans, langsmith %d runs; tokens sent %d, langfuse %d, langsmith %d (log: %s)",
			lostLF, lostLS, s.Tokens, a.Tokens, b.Tokens, logPath)
	}
	return nil
}

func missing(want map[string]bool, got map[string]int) int {
	n := 0
	for id := range want {
		if got[id] == 0 {
			n++
		}
	}
	return n
}

// queues reads the two exporters' queue sizes from one scrape (0 when a scrape failed:
// the table is a progress report, the drain check above needs the series).
func queues(m faulty.Metrics) (langfuse, langsmith float64) {
	langfuse, _ = m.Sum("otelcol_exporter_queue_size", `exporter="langfuse"`)
	langsmith, _ = m.Sum("otelcol_exporter_queue_size", `exporter="langsmith"`)
	return langfuse, langsmith
}
