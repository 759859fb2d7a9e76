package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// shippedWithoutMerge is shippedRun with both subagentmerge instances (the merge and
// LangSmith's gather) taken out of their pipelines and nothing else changed but what
// the gather was: the sending queue of the exporter after it, whose spans then go to
// the queued langsmith exporter. What the merge costs is the difference.
func shippedWithoutMerge(b *bench, sk *sink) (collectorRun, error) {
	return shippedWithout(b, sk, "shipped_nomerge",
		[2]string{"processors: [memory_limiter, genainormalize, genaicost, subagentmerge]", "processors: [memory_limiter, genainormalize, genaicost]"},
		withoutGather[0], withoutGather[1])
}

// withoutGather takes LangSmith's gather out of its pipeline, and its spans to the
// langsmith exporter with its own sending queue (the gather was langsmith/gathered's).
var withoutGather = [2][2]string{
	{"processors: [subagentmerge/langsmith]", "processors: []"},
	{"exporters: [langsmith/gathered]", "exporters: [langsmith]"},
}

// shippedWithoutGather is shippedRun with only LangSmith's gather taken out: LangSmith
// then takes the spans without a placement as they come (placed by what it has seen of
// their traces, not exact), so the difference to shippedRun is what gathering costs,
// and the difference to shippedWithoutMerge what the stream merge costs.
func shippedWithoutGather(b *bench, sk *sink) (collectorRun, error) {
	return shippedWithout(b, sk, "shipped_nogather", withoutGather[0], withoutGather[1])
}

// shippedWithout is shippedRun named name, its config with each replacement made.
func shippedWithout(b *bench, sk *sink, name string, replace ...[2]string) (collectorRun, error) {
	cr, err := shippedRun(b, sk)
	if err != nil {
		return cr, err
	}
	raw, err := os.ReadFile(filepath.Join(b.repo, "otelcol-config.yaml"))
	if err != nil {
		return collectorRun{}, fmt.Errorf("shipped config: %w", err)
	}
	cfg := string(raw)
	for _, r := range replace {
		if !strings.Contains(cfg, r[0]) {
			return collectorRun{}, fmt.Errorf("otelcol-config.yaml no longer has %q in a pipeline", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	cr.name, cr.args, cr.config = name, nil, cfg
	return cr, nil
}

// stockDurableRun is what a user would build from stock components for the same
// durability: otlp → memory_limiter → batch → two otlphttp exporters, each with a
// file_storage sending queue, towards the sink. Done when both have sent every span.
func stockDurableRun(b *bench, sk *sink) (collectorRun, error) {
	otlp, tel, err := b.runPorts()
	if err != nil {
		return collectorRun{}, err
	}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
processors:
  memory_limiter: {check_interval: 1s, limit_mib: 512, spike_limit_mib: 128}
  batch: {}
exporters:
  otlphttp/a: {endpoint: %q, sending_queue: {storage: file_storage}}
  otlphttp/b: {endpoint: %q, sending_queue: {storage: file_storage}}
extensions:
  file_storage: {directory: "${env:AGENTMETER_STORAGE_DIR}", create_directory: true}
service:
  extensions: [file_storage]
  telemetry:
    logs: {level: warn}
    metrics:
      level: basic
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %s}}}}]
  pipelines:
    traces: {receivers: [otlp], processors: [memory_limiter, batch], exporters: [otlphttp/a, otlphttp/b]}
`, otlp, sk.url+"/a", sk.url+"/b", tel)
	return collectorRun{name: "stock_durable", config: cfg, otlpAddr: otlp,
		metrics: "http://127.0.0.1:" + tel + "/metrics", exporters: []string{"otlphttp/a", "otlphttp/b"}}, nil
}

// pairFunc builds one row from two runs' series (collectorPairs' pair); getFunc is one
// run's series of one figure.
type (
	pairFunc func(group, label, unit, ours, peer string, f func(load) float64, t *target) row
	getFunc  func(id string, f func(load) float64) []float64
)

// sidecarRows are the shipped sidecar against a stock durable collector and against itself
// without the merge, on the same load.
func (b *bench) sidecarRows(pair pairFunc, get getFunc, errs map[string]error) []row {
	g := "The shipped sidecar (otelcol-config.yaml, both vendor exporters on) vs a stock durable collector (otlp → memory_limiter → batch → two otlphttp exporters with file_storage queues), and vs itself without subagentmerge or without LangSmith's gather"
	rate := func(l load) float64 { return l.Rate }
	cpu := func(l load) float64 { return l.CPUPerMillion() } // CPU s per 1M spans = µs per span
	rss := func(l load) float64 { return l.PeakRSS }

	spansPerS := pair(g, "end-to-end spans/s, shipped sidecar vs stock durable collector", "spans/s", "shipped", "stock_durable", rate,
		&target{">=", 0.7, "≥ 0.7× stock durable"})
	cpuStock := pair(g, "collector CPU µs per span, shipped sidecar vs stock durable collector", "CPU µs", "shipped", "stock_durable", cpu,
		&target{"<=", 1.5, "≤ 1.5× stock durable"})
	cpuMerge := pair(g, "collector CPU µs per span, shipped sidecar vs shipped without subagentmerge", "CPU µs", "shipped", "shipped_nomerge", cpu,
		&target{"<=", 1.15, "merge ≤ 15% over the pipeline without it"})
	if cpuStock.err == "" && cpuMerge.err == "" {
		noMerge, _, _ := series(get("shipped_nomerge", cpu), get("stock_durable", cpu))
		cpuStock.facts = append(cpuStock.facts, fmt.Sprintf(
			"without subagentmerge the same pipeline used %s CPU µs per span (median) against the stock collector's %s; the merge adds %s µs per span (median of ours − without)",
			num(median(noMerge)), num(median(cpuStock.peer)), num(median(diff(cpuMerge.ours, cpuMerge.peer)))))
	}
	peak := row{group: g, label: "shipped sidecar peak RSS MiB (VmHWM)", unit: "MiB", oursIs: "shipped",
		target: &target{"<=", 400, "≤ 400 MiB"}}
	for _, v := range get("shipped", rss) {
		if !math.IsNaN(v) {
			peak.ours = append(peak.ours, v)
		}
	}
	if len(peak.ours) == 0 {
		err := firstErr(errs, "shipped")
		if err == nil {
			err = fmt.Errorf("no repeat of the shipped sidecar ran")
		}
		peak = withTarget(failedRow(g, peak.label, err), peak.target)
	}
	return []row{
		spansPerS, cpuStock,
		pair(g, "collector peak RSS MiB (VmHWM), shipped sidecar vs stock durable collector", "MiB", "shipped", "stock_durable", rss, nil),
		peak,
		pair(g, "end-to-end spans/s, shipped sidecar vs shipped without subagentmerge", "spans/s", "shipped", "shipped_nomerge", rate, nil),
		cpuMerge,
		pair(g, "collector peak RSS MiB (VmHWM), shipped sidecar vs shipped without subagentmerge", "MiB", "shipped", "shipped_nomerge", rss, nil),
		// where the merge's cost is: LangSmith's gather, then the stream merge
		pair(g, "collector CPU µs per span, shipped sidecar vs shipped without LangSmith's gather", "CPU µs", "shipped", "shipped_nogather", cpu, nil),
		pair(g, "collector CPU µs per span, shipped without the gather vs shipped without subagentmerge (the stream merge alone)", "CPU µs", "shipped_nogather", "shipped_nomerge", cpu, nil),
	}
}

// diff is a − b per repeat.
func diff(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		out = append(out, a[i]-b[i])
	}
	return out
}
