package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentmeter/agentmeter/internal/childproc"
)

// load is what bench/subagentmerge_loadgen reports for one collector run.
type load struct {
	Acked   float64 // spans acked by the collector
	Lost    float64 // acked spans never exported (only with allowLoss)
	Rate    float64 // end-to-end spans/s
	CPU     float64 // collector CPU seconds during the load
	PeakRSS float64 // collector VmHWM, MiB
	// when collectorRun.mark spans were acked: seconds since the start, collector CPU
	// seconds, collector VmHWM in MiB (NaN without a mark)
	MarkS, MarkCPU, MarkRSS float64
	SinkB                   float64 // bytes the sink received during the run
	SinkReqs                float64 // requests the sink received during the run
}

// CPUPerMillion is collector CPU seconds per million spans.
func (l load) CPUPerMillion() float64 { return l.CPU / l.Acked * 1e6 }

// BytesPerSpan is what reached the sink on the wire (compressed as sent) per span.
func (l load) BytesPerSpan() float64 { return l.SinkB / l.Acked }

// collectorRun is one collector process under load.
type collectorRun struct {
	name      string
	config    string   // YAML written to the run's folder and passed with --config
	args      []string // used instead of config when set (the shipped file)
	env       []string // added to the collector's environment
	otlpAddr  string   // OTLP/gRPC address the load goes to
	metrics   string   // the collector's own /metrics URL
	exporters []string // exporters that must each send every span (nil: the sum of all)
	allowLoss bool     // groupbytrace may drop spans; report them instead of failing
	mark      int      // also read the peak RSS when this many spans were acked
	wait      time.Duration
}

// collectorEnv is the bench collectors' environment: none of the vendors' variables
// (childproc.VendorEnv), and no AGENTMETER_ address from the shell, which would move a port.
func collectorEnv(extra []string) []string {
	return append(childproc.EnvWithout(slices.Concat(childproc.VendorEnv, []string{"AGENTMETER_"})...), extra...)
}

// runLoad starts the collector, drives spans through it with the load generator, and
// stops it. hard bounds the whole run.
func (b *bench) runLoad(cr collectorRun, spans int, hard time.Duration, sk *sink) (load, error) {
	hard, err := b.bound(hard)
	if err != nil {
		return load{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), hard)
	defer cancel()
	dir, err := os.MkdirTemp(b.tmp, cr.name+"-")
	if err != nil {
		return load{}, fmt.Errorf("run folder: %w", err)
	}
	args := cr.args
	if cr.config != "" {
		p := filepath.Join(dir, "otelcol.yaml")
		if err := os.WriteFile(p, []byte(cr.config), 0o600); err != nil {
			return load{}, fmt.Errorf("write config: %w", err)
		}
		args = []string{"--config", p}
	}
	logPath := filepath.Join(dir, "collector.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return load{}, fmt.Errorf("collector log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(b.collector, args...)
	// every run its own file_storage folder: a queue left by an earlier run (or by a
	// sidecar on the machine) must not be replayed into this one
	env := append(append([]string(nil), cr.env...), "AGENTMETER_STORAGE_DIR="+filepath.Join(dir, "storage"))
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, logf, logf, collectorEnv(env)
	// a collector never outlives the driver, even when it is killed at the backstop timeout
	col, err := childproc.Start(cmd)
	if err != nil {
		return load{}, fmt.Errorf("start collector: %w", err)
	}
	defer col.Stop(20 * time.Second)
	withLog := func(err error) error {
		col.Stop(20 * time.Second)
		return fmt.Errorf("%s: %w\n--- collector log (last lines) ---\n%s", cr.name, err, childproc.Tail(logPath, 30))
	}
	if err := col.WaitReady(ctx, 60*time.Second, func() bool { return childproc.Listening(cr.otlpAddr) && childproc.AnswersOK(cr.metrics) }); err != nil {
		return load{}, withLog(fmt.Errorf("collector (OTLP port and /metrics): %w", err))
	}
	var before sinkCount
	if sk != nil {
		before = sk.count()
	}
	wait := cr.wait
	if wait == 0 {
		wait = 60 * time.Second
	}
	lg := []string{"-endpoint", cr.otlpAddr, "-metrics", cr.metrics, "-pid", strconv.Itoa(cmd.Process.Pid),
		"-spans", strconv.Itoa(spans), "-timeout", wait.String()}
	if len(cr.exporters) > 0 {
		lg = append(lg, "-exporters", strings.Join(cr.exporters, ","))
	}
	if cr.allowLoss {
		lg = append(lg, "-allow-loss")
	}
	if cr.mark > 0 {
		lg = append(lg, "-mark-spans", strconv.Itoa(cr.mark))
	}
	lgCmd := exec.CommandContext(ctx, b.loadgen, lg...)
	lgCmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := lgCmd.CombinedOutput()
	if err != nil {
		return load{}, withLog(fmt.Errorf("load generator: %w: %s", err, childproc.LastLines(string(out), 5)))
	}
	l, err := parseLoad(string(out))
	if err != nil {
		return load{}, withLog(err)
	}
	if sk != nil {
		after := sk.count()
		l.SinkB, l.SinkReqs = float64(after.bytes-before.bytes), float64(after.requests-before.requests)
	}
	select {
	case <-col.Done():
		return load{}, withLog(fmt.Errorf("collector exited during the load: %v", col.Err()))
	default:
	}
	return l, nil
}

// parseLoad reads the load generator's key=value line.
func parseLoad(out string) (load, error) {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "spans_acked=") {
			line = l
		}
	}
	if line == "" {
		return load{}, fmt.Errorf("no result line from the load generator: %s", childproc.LastLines(out, 5))
	}
	kv := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return load{}, fmt.Errorf("load generator field %s: %w", f, err)
		}
		kv[k] = x
	}
	for _, k := range []string{"spans_acked", "e2e_spans_per_s", "cpu_s", "peak_rss_mib"} {
		if _, ok := kv[k]; !ok {
			return load{}, fmt.Errorf("load generator line lacks %s: %s", k, line)
		}
	}
	for _, k := range []string{"mark_s", "mark_cpu_s", "peak_rss_at_mark_mib"} {
		if _, ok := kv[k]; !ok {
			kv[k] = math.NaN()
		}
	}
	if kv["spans_acked"] <= 0 {
		return load{}, fmt.Errorf("the collector acked no spans: %s", line)
	}
	return load{Acked: kv["spans_acked"], Lost: kv["lost"], Rate: kv["e2e_spans_per_s"], CPU: kv["cpu_s"], PeakRSS: kv["peak_rss_mib"],
		MarkS: kv["mark_s"], MarkCPU: kv["mark_cpu_s"], MarkRSS: kv["peak_rss_at_mark_mib"]}, nil
}

// freePort is childproc.FreePort as the text a config takes.
func freePort() (string, error) {
	p, err := childproc.FreePort()
	return strconv.Itoa(p), err
}

// envDefault matches ${env:NAME:-default} in the shipped config.
var envDefault = regexp.MustCompile(`\$\{env:([A-Za-z0-9_]+):-([^}]*)\}`)

// shippedPorts moves every address of the shipped config to a free loopback port: each
// ${env:NAME:-host:port} gets a new host:port, each ${env:NAME_PORT:-n} a new port. So
// ports added to the file later are moved too, and the bench never clashes with a
// sidecar running on the machine.
func shippedPorts(yaml string) (map[string]string, error) {
	out := map[string]string{}
	hostPort := regexp.MustCompile(`^[0-9.]+:[0-9]+$`)
	for _, m := range envDefault.FindAllStringSubmatch(yaml, -1) {
		name, def := m[1], m[2]
		if _, done := out[name]; done {
			continue
		}
		switch {
		case hostPort.MatchString(def):
			a, err := childproc.FreeAddr()
			if err != nil {
				return nil, err
			}
			out[name] = a
		case strings.HasSuffix(name, "_PORT"):
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			out[name] = port
		}
	}
	return out, nil
}

// sink is the one loopback server every exporter of a pair sends to: it reads each body
// and answers 200 (LangSmith's /info gets the SaaS batch limits). It counts requests and
// bytes as they arrive (compressed, as sent).
type sink struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	n   sinkCount
}

type sinkCount struct{ requests, bytes int64 }

func newSink() (*sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sink listen: %w", err)
	}
	s := &sink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/info" {
		_, _ = io.WriteString(w, `{"batch_ingest_config":{"use_multipart_endpoint":true,"size_limit":100,"size_limit_bytes":20971520}}`)
		return
	}
	n, _ := io.Copy(io.Discard, bufio.NewReaderSize(r.Body, 64<<10))
	s.mu.Lock()
	s.n.requests++
	s.n.bytes += n
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *sink) count() sinkCount {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *sink) close() { _ = s.srv.Close() }
