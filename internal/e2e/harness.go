//go:build e2e

// Package e2e runs the ocb-built agentmeter collector as a real process for end-to-end
// tests: it builds the distribution once per test run (or takes the one `make test`
// built), starts it on free loopback ports with a generated config, sends OTLP and reads
// results back through the file exporter.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/childproc"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// CollectorBinary returns the path of the ocb-built collector. It uses
// $AGENTMETER_COLLECTOR when set (make test builds it first); otherwise it runs
// `make collector` once per test process, under a file lock so parallel test packages
// never run ocb in the same folder at once.
func CollectorBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("AGENTMETER_COLLECTOR"); p != "" {
			if _, err := os.Stat(p); err == nil {
				buildPath = p
				return
			}
		}
		buildPath, buildErr = buildCollector()
	})
	if buildErr != nil {
		t.Fatalf("building the collector with ocb: %v", buildErr)
	}
	return buildPath
}

func buildCollector() (string, error) {
	root := RepoRoot()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "agentmeter-ocb.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("open build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("take build lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	cmd := exec.Command("make", "--no-print-directory", "collector")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make collector: %w\n%s", err, out)
	}
	return filepath.Join(root, "bin", "agentmeter-collector"), nil
}

// FreePort returns a loopback TCP port that was free a moment ago and not handed out
// before in this test process (childproc.FreePort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := childproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeAddr is FreePort as a loopback host:port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// process is a child process whose output is kept (the collector, agentmeter serve,
// Prometheus).
type process struct {
	*childproc.Process
	logs *lockedBuffer
}

// startProcess runs bin with args in dir, with env added to the test's environment.
func startProcess(t testing.TB, dir string, env []string, bin string, args ...string) *process {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), env...)
	pr, err := childproc.Start(cmd)
	if err != nil {
		t.Fatalf("start %s: %v", filepath.Base(bin), err)
	}
	return &process{Process: pr, logs: logs}
}

// Logs returns everything the process wrote so far.
func (p *process) Logs() string { return p.logs.String() }

// Exited reports whether the process has ended, and how.
func (p *process) Exited() (bool, error) {
	select {
	case <-p.Done():
		return true, p.Err()
	default:
		return false, nil
	}
}

// Wait waits for the process to end by itself (e.g. a config the collector refuses).
func (p *process) Wait(timeout time.Duration) error {
	select {
	case <-p.Done():
		return p.Err()
	case <-time.After(timeout):
		return fmt.Errorf("process still running after %s", timeout)
	}
}

// Collector is one running collector process.
type Collector struct {
	*process
	Dir string // its working folder (config, file exporter output, storage)
}

// Start runs the collector with the given config YAML and waits until the TCP address
// ready (e.g. the OTLP HTTP endpoint) accepts connections. The process is stopped
// gracefully (SIGTERM) at test cleanup, and its logs are printed if the test failed.
func Start(t testing.TB, configYAML, ready string) *Collector {
	t.Helper()
	dir := t.TempDir()
	return StartIn(t, dir, configYAML, ready)
}

// StartIn is Start with a caller-chosen working folder, so a restarted collector finds
// the persistent queue of the previous one.
func StartIn(t testing.TB, dir, configYAML, ready string) *Collector {
	t.Helper()
	cfgPath := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgPath, []byte(configYAML), 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return StartWithArgs(t, dir, ready, "--config", cfgPath)
}

// StartWithArgs runs the collector with arbitrary command-line arguments (several
// --config files merged, feature gates), in dir, and waits until ready accepts
// connections. Lifecycle and log handling are those of Start.
func StartWithArgs(t testing.TB, dir, ready string, args ...string) *Collector {
	t.Helper()
	c := &Collector{process: startProcess(t, dir, nil, CollectorBinary(t), args...), Dir: dir}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("collector logs:\n%s", c.Logs())
		}
	})
	if ready != "" {
		if err := c.waitTCP(ready, 60*time.Second); err != nil {
			t.Fatalf("collector not ready on %s: %v\nlogs:\n%s", ready, err, c.Logs())
		}
	}
	return c
}

// TraceSink is a collector that receives OTLP/HTTP and writes every span it gets to a
// file (batch 100 ms, file exporter in json, flushed every 100 ms).
type TraceSink struct {
	*Collector
	OTLP   string // the OTLP/HTTP receiver's host:port
	Traces string // the file exporter's output, for ReadTraces and WaitForSpans
}

// StartTraceSink starts a TraceSink working in dir (its output is dir/traces.jsonl) and
// waits until its OTLP/HTTP endpoint accepts connections.
func StartTraceSink(t testing.TB, dir string) *TraceSink {
	t.Helper()
	s := &TraceSink{OTLP: FreeAddr(t), Traces: filepath.Join(dir, "traces.jsonl")}
	s.Collector = StartIn(t, dir, fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      http: {endpoint: %q}
processors:
  batch: {timeout: 100ms}
exporters:
  file: {path: %q, format: json, flush_interval: 100ms}
service:
  telemetry: {metrics: {level: none}, logs: {level: warn}}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [file]}
`, s.OTLP, s.Traces), s.OTLP)
	return s
}

func (c *Collector) waitTCP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-c.Done():
			return fmt.Errorf("collector exited: %v", c.Err())
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("timed out after %s", timeout)
}

// Stop ends the collector gracefully (SIGTERM, then SIGKILL after 30 s) and waits.
func (c *Collector) Stop() { c.Process.Stop(30 * time.Second) }

// SendOTLPHTTP posts traces as OTLP/HTTP protobuf to http://addr/v1/traces.
func SendOTLPHTTP(ctx context.Context, addr string, td ptrace.Traces) error {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return fmt.Errorf("marshal otlp: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post otlp: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post otlp: status %s", resp.Status)
	}
	return nil
}

// ReadTraces reads a file exporter's output (format: json, one ExportTraceServiceRequest
// per line). A missing file reads as no traces.
func ReadTraces(path string) ([]ptrace.Traces, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var out []ptrace.Traces
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	var um ptrace.JSONUnmarshaler
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		td, err := um.UnmarshalTraces(line)
		if err != nil {
			// the exporter may be mid-write: a partial last line is retried by the caller
			return out, fmt.Errorf("decode %s: %w", path, err)
		}
		out = append(out, td)
	}
	return out, sc.Err()
}

// Spans flattens traces into their spans, keyed by nothing: a convenience for assertions.
func Spans(tds []ptrace.Traces) []ptrace.Span {
	return slices.Collect(spaniter.In(tds))
}

// WaitForSpans polls the file exporter output until it holds at least n distinct spans
// (by trace and span id: a streaming merge's re-emission of a span is not another span)
// and returns every version, in the order written.
func WaitForSpans(t testing.TB, path string, n int, timeout time.Duration) []ptrace.Span {
	t.Helper()
	return pollSpans(t, path, timeout, func(spans []ptrace.Span) (bool, string) {
		distinct := countDistinct(spans)
		return distinct >= n, fmt.Sprintf("%d spans, have %d", n, distinct)
	})
}

// WaitForSettledSpans waits until path holds at least n distinct spans, every span
// whose first emission left its caller pending (a model call whose task had not ended
// yet) has the re-emission that settles it, and nothing more has landed for longer than
// the shipped settle_time (2 s): a streamed merge re-emits a span whose merged numbers
// or status changed (a dispatching call, a task's tool span once its subagent is
// merged) at most once a settle window, so a version can land up to that long after
// the one before it. It returns every version, in the order written: what a test of a
// run's final tree reads.
func WaitForSettledSpans(t testing.TB, path string, n int, timeout time.Duration) []ptrace.Span {
	t.Helper()
	const quiet = 2500 * time.Millisecond
	last, lastChange := -1, time.Now()
	return pollSpans(t, path, timeout, func(spans []ptrace.Span) (bool, string) {
		if len(spans) != last {
			last, lastChange = len(spans), time.Now()
		}
		distinct, unsettled := countDistinct(spans), pendingCallers(spans)
		return distinct >= n && unsettled == 0 && time.Since(lastChange) >= quiet,
			fmt.Sprintf("%d spans (have %d) with no caller pending (%d are)", n, distinct, unsettled)
	})
}

// pollSpans reads the file exporter output at path every 100 ms until ready says the
// spans there (every version, in the order written) are what the caller waits for, and
// returns them; past timeout it fails the test with what ready last said it waits for.
func pollSpans(t testing.TB, path string, timeout time.Duration, ready func([]ptrace.Span) (bool, string)) []ptrace.Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		tds, err := ReadTraces(path)
		var spans []ptrace.Span
		if err == nil {
			spans = Spans(tds)
		}
		ok, want := ready(spans)
		if ok && err == nil {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s in %s for %s (last error: %v)", timeout, path, want, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pendingCallers counts the spans emitted with a pending caller and not yet settled.
func pendingCallers(spans []ptrace.Span) int {
	type id struct {
		t pcommon.TraceID
		s pcommon.SpanID
	}
	pending := map[id]bool{}
	for _, sp := range spans {
		k := id{sp.TraceID(), sp.SpanID()}
		v := genai.VersionOf(sp.Attributes())
		switch {
		case v.Settled:
			pending[k] = false
		case v.Pending:
			if _, seen := pending[k]; !seen {
				pending[k] = true
			}
		}
	}
	n := 0
	for _, p := range pending {
		if p {
			n++
		}
	}
	return n
}

func countDistinct(spans []ptrace.Span) int {
	type id struct {
		t pcommon.TraceID
		s pcommon.SpanID
	}
	seen := make(map[id]struct{}, len(spans))
	for _, sp := range spans {
		seen[id{sp.TraceID(), sp.SpanID()}] = struct{}{}
	}
	return len(seen)
}

// WaitForExactSpans waits for n spans in path, gives a late batch time to land (300 ms)
// and requires exactly n: for tests that know every span a run exports.
func WaitForExactSpans(t testing.TB, path string, n int, timeout time.Duration) []ptrace.Span {
	t.Helper()
	WaitForSpans(t, path, n, timeout)
	time.Sleep(300 * time.Millisecond)
	tds, err := ReadTraces(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	spans := Spans(tds)
	if len(spans) != n {
		t.Fatalf("want exactly %d spans in %s, have %d", n, path, len(spans))
	}
	return spans
}

// lockedBuffer collects process output written from two pipes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
