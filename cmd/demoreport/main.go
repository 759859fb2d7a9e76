// Command demoreport runs `make demo`: it starts the agentmeter collector with
// otelcol-config.yaml plus a file exporter, runs `agentmeter run --json` on the built-in
// scripted demo with OTEL_EXPORTER_OTLP_ENDPOINT pointed at it, then prints the answer, a
// table of every model call (own usage, and the merged subagent usage on the dispatching
// call, read back from what the collector exported, with each call's cost), the
// agentmeter_tokens_total and agentmeter_cost_usd_total lines scraped from the collector's
// Prometheus endpoint, and the cost in total and per caller three ways. It stops the
// collector and exits 1 when the journal, the spans and Prometheus disagree on any number.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/childproc"
)

// overlayYAML adds the demo's file exporter to the traces pipeline; the collector merges it
// over otelcol-config.yaml (second --config, lists appended by the
// confmap.enableMergeAppendOption feature gate).
//
//go:embed overlay.yaml
var overlayYAML []byte

// tokensMetric is the counter the demo prints and checks (docs/contract.md#metrics).
const tokensMetric = genai.MetricTokensProm

type options struct {
	collector, agentmeter, config string
	prompt                        string
	runs                          int
	timeout                       time.Duration
	keepDir                       bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("demoreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.collector, "collector", "bin/agentmeter-collector", "the ocb-built collector")
	fs.StringVar(&o.agentmeter, "agentmeter", "bin/agentmeter", "the agentmeter CLI")
	fs.StringVar(&o.config, "config", "otelcol-config.yaml", "the sidecar configuration")
	fs.StringVar(&o.prompt, "prompt", "Research the two best approaches to metering agent token usage and compare them.", "the prompt for the scripted demo")
	fs.IntVar(&o.runs, "runs", 1, "how many times to run the demo")
	fs.DurationVar(&o.timeout, "timeout", 90*time.Second, "bound on the whole demo")
	fs.BoolVar(&o.keepDir, "keep", false, "keep the work folder (collector log, exported spans)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.runs < 1 {
		fmt.Fprintln(stderr, "demoreport: -runs must be at least 1")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := demo(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "\ndemo FAILED:\n%v\n", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func demo(ctx context.Context, o options, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "agentmeter-demo-")
	if err != nil {
		return fmt.Errorf("work folder: %w", err)
	}
	if o.keepDir {
		fmt.Fprintf(stderr, "demoreport: work folder %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	overlay := filepath.Join(dir, "demo-overlay.yaml")
	if err := os.WriteFile(overlay, overlayYAML, 0o600); err != nil {
		return fmt.Errorf("write overlay: %w", err)
	}
	tracesFile := filepath.Join(dir, "traces.jsonl")
	// the same defaults as otelcol-config.yaml; the AGENTMETER_* variables move both
	otlpHTTP := envOr("AGENTMETER_OTLP_HTTP_ENDPOINT", "127.0.0.1:4318")
	promAddr := envOr("AGENTMETER_PROMETHEUS_ENDPOINT", "127.0.0.1:8889")
	health := envOr("AGENTMETER_HEALTH_ENDPOINT", "127.0.0.1:13133")
	telemetry := net.JoinHostPort(envOr("AGENTMETER_TELEMETRY_HOST", "127.0.0.1"), envOr("AGENTMETER_TELEMETRY_PORT", "8888"))
	for _, addr := range []string{otlpHTTP, envOr("AGENTMETER_OTLP_GRPC_ENDPOINT", "127.0.0.1:4317"), promAddr, health, telemetry,
		envOr("AGENTMETER_AGENTUSAGE_ENDPOINT", "127.0.0.1:4319")} {
		if err := portFree(addr); err != nil {
			return err
		}
	}

	// 1. the collector
	logPath := filepath.Join(dir, "collector.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("collector log: %w", err)
	}
	defer logFile.Close()
	col := exec.Command(o.collector, "--config", o.config, "--config", overlay,
		"--feature-gates=confmap.enableMergeAppendOption")
	col.Env = append(os.Environ(), "AGENTMETER_DEMO_TRACES_FILE="+tracesFile)
	if os.Getenv("AGENTMETER_STORAGE_DIR") == "" {
		// a fresh store per demo: nothing left from an earlier run is sent again
		col.Env = append(col.Env, "AGENTMETER_STORAGE_DIR="+filepath.Join(filepath.Dir(tracesFile), "storage"))
	}
	col.Stdout, col.Stderr = logFile, logFile
	proc, err := childproc.Start(col)
	if err != nil {
		return fmt.Errorf("start collector %s: %w", o.collector, err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		select {
		case <-proc.Done():
			return fmt.Errorf("collector had already exited: %v", proc.Err())
		default:
		}
		if proc.Stop(20 * time.Second) {
			return errors.New("collector did not stop within 20s of SIGTERM; killed")
		}
		return proc.Err()
	}
	defer stop() // stopped explicitly on the success path
	collectorLog := func() string { return childproc.Tail(logPath, 40) }
	if err := waitHealthy(ctx, "http://"+health+"/", proc); err != nil {
		return fmt.Errorf("collector not healthy: %w\ncollector log:\n%s", err, collectorLog())
	}
	fmt.Fprintf(stdout, "collector up: OTLP http://%s, metrics http://%s/metrics, health http://%s/\n", otlpHTTP, promAddr, health)

	// 2. the agent, n times
	var (
		journal  Completion
		traceIDs = map[string]bool{}
		results  []RunResult
	)
	for i := 0; i < o.runs; i++ {
		res, err := runAgent(ctx, o, otlpHTTP)
		if err != nil {
			return err
		}
		results = append(results, res)
		if res.TraceID != "" {
			traceIDs[strings.ToLower(res.TraceID)] = true
		}
		journal = journal.Add(res.Completion)
	}

	// 3. what the collector exported, and what Prometheus would scrape
	calls, err := waitForCalls(ctx, tracesFile, traceIDs, journal)
	if err != nil {
		return fmt.Errorf("%w\ncollector log:\n%s", err, collectorLog())
	}
	spans := Totals(calls)
	// the metrics path runs beside the file exporter: a few seconds at most
	mctx, mcancel := context.WithTimeout(ctx, 15*time.Second)
	samples, costSamples, err := waitForMetrics(mctx, "http://"+promAddr+"/metrics", spans)
	mcancel()
	if err != nil {
		return fmt.Errorf("%w\ncollector log:\n%s", err, collectorLog())
	}
	prom := SumTokens(samples)
	prom.Cost = SumCost(costSamples)

	for i, r := range results {
		fmt.Fprintf(stdout, "\n== run %d: thread %s, run %s, trace %s\nanswer: %s\n", i+1, r.ThreadID, r.RunID, r.TraceID, r.Answer)
	}
	fmt.Fprintf(stdout, "\n== model calls (own usage and cost from the exported chat spans; merged subagent usage on the dispatching call)\n")
	if err := WriteCallTable(stdout, calls); err != nil {
		return fmt.Errorf("print table: %w", err)
	}
	fmt.Fprintf(stdout, "\n== %s and %s scraped from http://%s/metrics\n", tokensMetric, costMetric, promAddr)
	for _, s := range append(samples, costSamples...) {
		fmt.Fprintln(stdout, s.Line)
	}
	fmt.Fprintf(stdout, "\n== totals (input+output; cache_read/cache_creation are parts of input, reasoning of output)\njournal:    total_tokens %d (lead_agent %d, subagent %d, middleware %d)\n",
		journal.TotalTokens, journal.LeadAgentTokens, journal.SubagentTokens, journal.MiddlewareTokens)
	fmt.Fprintf(stdout, "spans:      input+output %d (lead_agent %d, subagent %d, middleware %d), %d calls; all five token kinds %d\n",
		spans.Usage.Total(), spans.ByCaller[genai.BucketLeadAgent], spans.ByCaller[genai.BucketSubagent], spans.ByCaller[genai.BucketMiddleware], spans.Calls, AllKinds(spans.Usage))
	fmt.Fprintf(stdout, "prometheus: input+output %.0f (lead_agent %.0f, subagent %.0f, middleware %.0f); sum(%s) %.0f\n",
		prom.InputOutput, prom.ByCaller[genai.BucketLeadAgent], prom.ByCaller[genai.BucketSubagent], prom.ByCaller[genai.BucketMiddleware], tokensMetric, prom.All)
	fmt.Fprintf(stdout, "\n== cost in USD (demo prices: cmd/agentmeter/demo-config.yaml)\n")
	for _, row := range []struct {
		name string
		c    CostTotals
	}{{"journal:   ", CostTotals{Total: journal.TotalCostUSD, ByCaller: journal.CostUSDByCaller}}, {"spans:     ", spans.Cost}, {"prometheus:", prom.Cost}} {
		fmt.Fprintf(stdout, "%s total %.6f (lead_agent %.6f, subagent %.6f, middleware %.6f)\n", row.name, row.c.Total,
			row.c.ByCaller[genai.BucketLeadAgent], row.c.ByCaller[genai.BucketSubagent], row.c.ByCaller[genai.BucketMiddleware])
	}

	if err := stop(); err != nil {
		fmt.Fprintf(stderr, "demoreport: collector stop: %v\n", err)
	}
	fmt.Fprintln(stdout, "collector stopped")
	if err := Check(journal, spans, prom); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "OK: journal, spans and Prometheus agree on tokens and cost")
	return nil
}

// portFree fails when something already listens on addr: the demo would talk to it
// instead of the collector it starts.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is in use (a collector still running?): %w; stop it or move the demo with the AGENTMETER_*_ENDPOINT variables", addr, err)
	}
	return l.Close()
}

func waitHealthy(ctx context.Context, url string, col *childproc.Process) error {
	for {
		select {
		case <-col.Done():
			return fmt.Errorf("collector exited: %v", col.Err())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runAgent(ctx context.Context, o options, otlpHTTP string) (RunResult, error) {
	cmd := exec.CommandContext(ctx, o.agentmeter, "run", "--json", o.prompt)
	cmd.Env = append(os.Environ(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlpHTTP,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return RunResult{}, fmt.Errorf("%s run --json: %w\nstderr:\n%s", o.agentmeter, err, childproc.LastLines(errOut.String(), 40))
	}
	var res RunResult
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil {
		return RunResult{}, fmt.Errorf("%s run --json printed no JSON object: %w\nstdout:\n%s", o.agentmeter, err, childproc.LastLines(out.String(), 20))
	}
	return res, nil
}

// waitForCalls polls the file exporter until the exported model calls add up to the
// journal (or stop changing), so a slow batch is waited for and a real mismatch is
// reported rather than hidden.
func waitForCalls(ctx context.Context, path string, traceIDs map[string]bool, journal Completion) ([]Call, error) {
	var (
		calls      []Call
		lastChange = time.Now()
		lastTotal  = int64(-1)
	)
	for {
		tds, err := ReadTracesFile(path)
		if err != nil {
			return nil, err
		}
		calls = CallsFromTraces(tds, traceIDs)
		t := Totals(calls)
		if t.Usage.Total() == journal.TotalTokens && hasMerge(calls, journal) {
			return calls, nil
		}
		if t.Usage.Total() != lastTotal {
			lastTotal, lastChange = t.Usage.Total(), time.Now()
		}
		// nothing new for 10 s after something arrived: report what we have
		if len(calls) > 0 && time.Since(lastChange) > 10*time.Second {
			return calls, nil
		}
		select {
		case <-ctx.Done():
			if len(calls) > 0 {
				return calls, nil
			}
			return nil, fmt.Errorf("no model-call spans reached the collector's file exporter (%s): %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// hasMerge: when subagents ran, the dispatching call's merged block has arrived too (the
// subagentmerge processor releases a trace once it is complete).
func hasMerge(calls []Call, journal Completion) bool {
	if journal.SubagentTokens == 0 {
		return true
	}
	for _, c := range calls {
		if c.HasMerged {
			return true
		}
	}
	return false
}

// waitForMetrics scrapes until the token and cost counters add up to the spans (or ctx
// ends: Check then reports the mismatch with all three numbers).
func waitForMetrics(ctx context.Context, url string, spans SpanTotals) (tokens, cost []PromSample, err error) {
	var lastErr error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var body bytes.Buffer
			_, lastErr = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if lastErr == nil {
				tokens, lastErr = ParsePromText(bytes.NewReader(body.Bytes()), tokensMetric)
			}
			if lastErr == nil {
				cost, lastErr = ParsePromText(bytes.NewReader(body.Bytes()), costMetric)
			}
			if lastErr == nil && SumTokens(tokens).InputOutput == float64(spans.Usage.Total()) && sameUSD(SumCost(cost).Total, spans.Cost.Total) {
				return tokens, cost, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return nil, nil, fmt.Errorf("scrape %s: %w", url, lastErr)
			}
			return tokens, cost, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
