// Command exporter_memory measures each vendor exporter's peak memory and throughput
// under a sender that pushes as fast as the collector acks: the ocb-built collector runs
// otlp (gRPC) -> batch -> one exporter with its default configuration (only the endpoint
// and a key set) in front of a local sink that reads and discards every body, and
// bench/subagentmerge_loadgen sends -runs spans (one LangSmith run per span) and waits
// until the exporter sent them all. For every exporter and run count it prints the
// collector's peak RSS (VmHWM) and the end-to-end rate, and whether the peak stayed flat
// (within -flat) between the smallest and the largest run count. bench/exporter_memory.sh
// is the entry point.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmeter/agentmeter/internal/childproc"
)

func main() {
	var (
		collector = flag.String("collector", "bin/agentmeter-collector", "ocb-built collector")
		loadgen   = flag.String("loadgen", "", "bench/subagentmerge_loadgen binary")
		exporters = flag.String("exporters", "langsmith,langfuse", "exporters to measure")
		runs      = flag.String("runs", "200000,1000000", "run counts (spans) to send, comma-separated")
		queue     = flag.String("queue", "", "sending_queue YAML to use instead of the default (e.g. the old default)")
		mibps     = flag.Float64("sink-mibps", 0, "the sink's bandwidth in MiB/s over all requests (0: unlimited): a vendor slower than the sender, so a backlog builds")
		enable    = flag.Bool("enable", false, "also write enabled: true (a build from before a key in the YAML enabled the langsmith exporter)")
		flat      = flag.Float64("flat", 0.20, "largest allowed relative growth of the peak RSS from the first run count to the last")
		dir       = flag.String("dir", "", "working folder (default: a temporary one)")
	)
	flag.Parse()
	if *enable {
		extraYAML = ", enabled: true"
	}
	sinkRate = *mibps * (1 << 20)
	if err := run(*collector, *loadgen, strings.Split(*exporters, ","), *runs, *queue, *flat, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "exporter_memory:", err)
		os.Exit(1)
	}
}

// extraYAML is appended to every exporter's settings.
var extraYAML string

// sinkRate is the sink's bandwidth in bytes/s (0: unlimited).
var sinkRate float64

// link is the sink's shared bandwidth: each body reserves its share of the link's time,
// one after the other, and its answer waits until then.
type link struct {
	mu   sync.Mutex
	next time.Time
}

func (l *link) wait(n int64) {
	if sinkRate <= 0 {
		return
	}
	l.mu.Lock()
	start := time.Now()
	if l.next.After(start) {
		start = l.next
	}
	l.next = start.Add(time.Duration(float64(n) / sinkRate * float64(time.Second)))
	until := l.next
	l.mu.Unlock()
	time.Sleep(time.Until(until))
}

type result struct {
	peakMiB, rate float64
}

func run(collector, loadgen string, exporters []string, runsFlag, queue string, flat float64, dir string) error {
	var counts []int
	for _, f := range strings.Split(runsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-runs: %q is not a positive count", f)
		}
		counts = append(counts, n)
	}
	if loadgen == "" {
		return errors.New("-loadgen is required")
	}
	dir, cleanup, err := childproc.WorkDir(dir, "agentmeter-exporter-memory-")
	if err != nil {
		return err
	}
	defer cleanup()
	var sinkBytes atomic.Int64
	var bandwidth link
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		sinkBytes.Add(n)
		bandwidth.wait(n)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet { // LangSmith's /info: the SDK defaults apply
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer sink.Close()

	if sinkRate > 0 {
		fmt.Printf("sink bandwidth %.1f MiB/s\n", sinkRate/(1<<20))
	}
	fmt.Printf("%-10s %10s %12s %14s %10s\n", "exporter", "runs", "peak_rss_mib", "e2e_spans/s", "sink_mib")
	failed := false
	for _, exp := range exporters {
		var res []result
		for _, n := range counts {
			before := sinkBytes.Load()
			r, err := once(collector, loadgen, dir, exp, sink.URL, queue, n)
			if err != nil {
				return fmt.Errorf("%s, %d runs: %w", exp, n, err)
			}
			res = append(res, r)
			fmt.Printf("%-10s %10d %12.1f %14.0f %10.1f\n", exp, n, r.peakMiB, r.rate, float64(sinkBytes.Load()-before)/(1<<20))
		}
		growth := res[len(res)-1].peakMiB/res[0].peakMiB - 1
		verdict := "flat"
		if growth > flat {
			verdict, failed = "NOT flat", true
		}
		fmt.Printf("%-10s peak RSS %d -> %d runs: %+.1f%% (%s, bound %.0f%%)\n", exp, counts[0], counts[len(counts)-1], 100*growth, verdict, 100*flat)
	}
	if failed {
		return errors.New("peak RSS grew with the run count")
	}
	return nil
}

var loadLine = regexp.MustCompile(`e2e_spans_per_s=([0-9.]+).*peak_rss_mib=([0-9.]+)`)

// once runs one collector under one load and reads the load generator's report.
func once(collector, loadgen, dir, exporter, sinkURL, queue string, spans int) (result, error) {
	otlp, err := childproc.FreeAddr()
	if err != nil {
		return result{}, err
	}
	tel, err := childproc.FreeAddr()
	if err != nil {
		return result{}, err
	}
	_, telPort, _ := net.SplitHostPort(tel)
	var body string
	switch exporter {
	case "langsmith":
		body = fmt.Sprintf("{endpoint: %q, api_key: lsv2_pt_bench_key", sinkURL)
	case "langfuse":
		body = fmt.Sprintf("{endpoint: %q, public_key: pk-lf-bench, secret_key: sk-lf-bench", sinkURL)
	default:
		return result{}, fmt.Errorf("unknown exporter %q", exporter)
	}
	if queue != "" {
		body += ", sending_queue: " + queue
	}
	body += extraYAML
	body += "}"
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
processors:
  batch: {}
exporters:
  %s: %s
service:
  telemetry:
    logs: {level: warn}
    metrics:
      level: basic
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %s}}}}]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [%s]}
`, otlp, exporter, body, telPort, exporter)
	cfgPath := filepath.Join(dir, exporter+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return result{}, fmt.Errorf("write config: %w", err)
	}
	logPath := filepath.Join(dir, exporter+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return result{}, fmt.Errorf("collector log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(collector, "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childproc.EnvWithout(childproc.VendorEnv...)
	col, err := childproc.Start(cmd)
	if err != nil {
		return result{}, fmt.Errorf("start collector: %w", err)
	}
	defer col.Stop(30 * time.Second)
	if err := col.WaitReady(context.Background(), 60*time.Second, func() bool { return childproc.Listening(otlp) && childproc.AnswersOK("http://"+tel+"/metrics") }); err != nil {
		return result{}, fmt.Errorf("collector: %w; collector log: %s", err, childproc.Tail(logPath, 10))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, loadgen, "-endpoint", otlp, "-spans", strconv.Itoa(spans),
		"-metrics", "http://"+tel+"/metrics", "-pid", strconv.Itoa(cmd.Process.Pid), "-exporters", exporter,
		"-timeout", "10m").CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("load: %w: %s; collector log: %s", err, childproc.LastLines(string(out), 5), childproc.Tail(logPath, 10))
	}
	m := loadLine.FindStringSubmatch(string(out))
	if m == nil {
		return result{}, fmt.Errorf("unreadable load report: %s", childproc.LastLines(string(out), 5))
	}
	rate, _ := strconv.ParseFloat(m[1], 64)
	peak, _ := strconv.ParseFloat(m[2], 64)
	return result{peakMiB: peak, rate: rate}, nil
}
