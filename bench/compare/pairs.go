package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentmeter/agentmeter/internal/childproc"
)

// The collector runs of one repeat, in the order they run. Each builds its config from
// the free ports and the repeat's sink.
type runSpec struct {
	id    string
	large bool // the langsmith large run (sz.lsLarge runs)
	build func(b *bench, sk *sink) (collectorRun, error)
}

var runSpecs = []runSpec{
	{id: "passthrough", build: bareRun("passthrough", "", "batch", "debug", "debug: {verbosity: basic}")},
	{id: "groupbytrace", build: func(b *bench, sk *sink) (collectorRun, error) {
		cr, err := bareRun("groupbytrace", fmt.Sprintf("groupbytrace: {wait_duration: %s, num_traces: 300000}", b.sz.gbtWait),
			"groupbytrace, batch", "debug", "debug: {verbosity: basic}")(b, sk)
		// groupbytrace drops the spans of a trace that arrive after its timer fired:
		// counted (lost=), not a failure
		cr.allowLoss, cr.wait = true, b.sz.gbtWait+20*time.Second
		return cr, err
	}},
	{id: "subagentmerge", build: bareRun("subagentmerge", "subagentmerge: {}", "subagentmerge, batch", "debug", "debug: {verbosity: basic}")},
	{id: "shipped", build: shippedRun},
	{id: "shipped_nomerge", build: shippedWithoutMerge},
	{id: "shipped_nogather", build: shippedWithoutGather},
	{id: "stock_durable", build: stockDurableRun},
	{id: "otlphttp_json", build: func(b *bench, sk *sink) (collectorRun, error) {
		return bareRun("otlphttp_json", "", "batch", "otlphttp",
			fmt.Sprintf("otlphttp: {endpoint: %q, encoding: json}", sk.url))(b, sk)
	}},
	{id: "langsmith", build: langsmithRun("langsmith")},
	{id: "otlphttp", build: func(b *bench, sk *sink) (collectorRun, error) {
		return bareRun("otlphttp", "", "batch", "otlphttp", fmt.Sprintf("otlphttp: {endpoint: %q}", sk.url))(b, sk)
	}},
	{id: "langfuse", build: func(b *bench, sk *sink) (collectorRun, error) {
		return bareRun("langfuse", "", "batch", "langfuse",
			fmt.Sprintf("langfuse: {endpoint: %q, public_key: pk-lf-bench, secret_key: sk-lf-bench}", sk.url))(b, sk)
	}},
	// Flat memory: one long load, its figures at the end against the same figures when
	// the first e2eSpans runs were acked. The sending queue is off so the exporter's
	// pace reaches the sender (batch blocks, the receiver acks later): memory is then what
	// the exporter holds, not a backlog of requests, which a sender faster than any
	// exporter builds in a queue whatever the run count.
	{id: "langsmith_large", large: true, build: func(b *bench, sk *sink) (collectorRun, error) {
		cr, err := bareRun("langsmith_large", "", "batch", "langsmith",
			fmt.Sprintf("langsmith: {enabled: true, endpoint: %q, api_key: lsv2_pt_bench, sending_queue: {enabled: false}}", sk.url))(b, sk)
		cr.mark = b.sz.e2eSpans
		return cr, err
	}},
}

func langsmithRun(name string) func(*bench, *sink) (collectorRun, error) {
	return func(b *bench, sk *sink) (collectorRun, error) {
		return bareRun(name, "", "batch", "langsmith",
			fmt.Sprintf("langsmith: {enabled: true, endpoint: %q, api_key: lsv2_pt_bench}", sk.url))(b, sk)
	}
}

// runPorts are a collector run's OTLP/gRPC address and its telemetry port.
func (b *bench) runPorts() (otlp, tel string, err error) {
	if otlp, err = childproc.FreeAddr(); err != nil {
		return "", "", err
	}
	tel, err = freePort()
	return otlp, tel, err
}

// bareRun is otlp (gRPC) -> processors -> one exporter, everything else at its defaults.
func bareRun(name, procYAML, procs, exporterID, exporterYAML string) func(*bench, *sink) (collectorRun, error) {
	return func(b *bench, _ *sink) (collectorRun, error) {
		otlp, tel, err := b.runPorts()
		if err != nil {
			return collectorRun{}, err
		}
		if procYAML != "" {
			procYAML = "\n  " + procYAML
		}
		cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
processors:
  batch: {}%s
exporters:
  %s
service:
  telemetry:
    logs: {level: warn}
    metrics:
      level: basic
      readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %s}}}}]
  pipelines:
    traces: {receivers: [otlp], processors: [%s], exporters: [%s]}
`, otlp, procYAML, exporterYAML, tel, procs, exporterID)
		return collectorRun{name: name, config: cfg, otlpAddr: otlp,
			metrics: "http://127.0.0.1:" + tel + "/metrics", exporters: []string{exporterID}}, nil
	}
}

// shippedRun is otelcol-config.yaml as it is in the repository, every port moved, both
// vendor exporters switched on (the environment, as a user does) towards the sink. The
// load is done when both vendor exporters have sent every span.
func shippedRun(b *bench, sk *sink) (collectorRun, error) {
	path := filepath.Join(b.repo, "otelcol-config.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return collectorRun{}, fmt.Errorf("shipped config: %w", err)
	}
	moved, err := shippedPorts(string(raw))
	if err != nil {
		return collectorRun{}, err
	}
	otlp, tel := moved["AGENTMETER_OTLP_GRPC_ENDPOINT"], moved["AGENTMETER_TELEMETRY_PORT"]
	if otlp == "" || tel == "" {
		return collectorRun{}, fmt.Errorf("%s no longer has ${env:AGENTMETER_OTLP_GRPC_ENDPOINT:-host:port} and ${env:AGENTMETER_TELEMETRY_PORT:-port}", path)
	}
	var env []string
	for k, v := range moved {
		env = append(env, k+"="+v)
	}
	env = append(env,
		"LANGSMITH_TRACING=true", "LANGSMITH_API_KEY=lsv2_pt_bench", "LANGSMITH_ENDPOINT="+sk.url, "LANGSMITH_PROJECT=bench",
		"LANGFUSE_TRACING=true", "LANGFUSE_PUBLIC_KEY=pk-lf-bench", "LANGFUSE_SECRET_KEY=sk-lf-bench", "LANGFUSE_BASE_URL="+sk.url)
	return collectorRun{name: "shipped", args: []string{"--config", path}, env: env, otlpAddr: otlp,
		metrics: "http://127.0.0.1:" + tel + "/metrics", exporters: []string{"langsmith+langsmith/gathered", "langfuse"}}, nil
}

// collectorPairs runs every collector run of runSpecs once per repeat and builds the
// end-to-end rows.
func (b *bench) collectorPairs() []row {
	runs := map[string][]load{}
	errs := map[string]error{}
	for rep := 1; rep <= b.sz.repeats; rep++ {
		// one loopback server for every run of the repeat: the pairs send to the same one
		sk, err := newSink()
		if err != nil {
			for _, spec := range runSpecs {
				errs[spec.id] = err
				runs[spec.id] = append(runs[spec.id], nanLoad())
			}
			continue
		}
		// odd repeats run the list forwards, even ones backwards: a pair's two sides take
		// turns going first, so a drift in machine load during a repeat hits both alike
		order := append([]runSpec(nil), runSpecs...)
		if rep%2 == 0 {
			slices.Reverse(order)
		}
		for _, spec := range order {
			l, err := b.oneRun(spec, rep, sk)
			if err != nil {
				b.progress("  %s failed: %v", spec.id, err)
				errs[spec.id] = err
				l = nanLoad()
			}
			runs[spec.id] = append(runs[spec.id], l)
		}
		sk.close()
	}
	get := func(id string, f func(load) float64) []float64 {
		var out []float64
		for _, l := range runs[id] {
			out = append(out, f(l))
		}
		return out
	}
	rate := func(l load) float64 { return l.Rate }
	cpu := func(l load) float64 { return l.CPUPerMillion() }
	rss := func(l load) float64 { return l.PeakRSS }
	wire := func(l load) float64 { return l.BytesPerSpan() }
	cpuPerRun := func(l load) float64 { return l.CPU / l.Acked * 1e6 } // µs per run

	// a repeat where either side failed counts for neither; the row stands on the others
	// and says so
	pair := func(group, label, unit, ours, peer string, f func(load) float64, t *target) row {
		err := firstErr(errs, ours, peer)
		o, p, r := series(get(ours, f), get(peer, f))
		if len(r) == 0 {
			if err == nil {
				err = fmt.Errorf("no repeat where both %s and %s ran", ours, peer)
			}
			fr := failedRow(group, label, err)
			fr.target = t
			return fr
		}
		rw := row{group: group, label: label, unit: unit, ours: o, peer: p, ratio: r, oursIs: ours, peerIs: peer, target: t}
		if err != nil {
			rw.warn = fmt.Sprintf("%d of %d repeats; %s", len(r), b.sz.repeats, strings.SplitN(err.Error(), "\n", 2)[0])
		}
		return rw
	}

	small, large := humanCount(b.sz.e2eSpans), humanCount(b.sz.lsLarge)
	gMerge := "subagentmerge, through the built collector (otlp → processor → batch → debug)"
	gSide := "The shipped sidecar pipeline (otelcol-config.yaml, both vendor exporters on) vs a bare collector (otlp → batch → debug)"
	gLS := "langsmith exporter vs the stock otlphttp exporter (encoding: json), same loopback server"
	gLSScale := fmt.Sprintf("langsmith exporter, one load of %s runs (one span is one run; otlp → batch → langsmith, sending queue off) into the loopback LangSmith: at its end vs after its first %s runs (memory must stay flat)", large, small)
	gLF := "langfuse exporter vs the stock otlphttp exporter (protobuf, gzip: both at their defaults), same loopback server"

	merge := pair(gMerge, "end-to-end spans/s, subagentmerge vs groupbytrace", "spans/s", "subagentmerge", "groupbytrace", rate,
		&target{">=", 3, "≥ 3× groupbytrace"})
	if merge.err == "" {
		_, pass, passRatio := series(get("subagentmerge", rate), get("passthrough", rate))
		var lost, lostReps float64
		for _, l := range runs["groupbytrace"] {
			if l.Lost > 0 {
				lost += l.Lost
				lostReps++
			}
		}
		merge.facts = append(merge.facts,
			fmt.Sprintf("the pass-through collector (no buffering at all) reached %s spans/s in the same repeats; subagentmerge ran at %.2f× of it (median), so %s",
				num(median(pass)), median(passRatio), passShare(median(passRatio))),
			fmt.Sprintf("groupbytrace's end to end includes its wait_duration (%s) after a trace's first span; subagentmerge releases a run when its root span arrives", b.sz.gbtWait),
			fmt.Sprintf("groupbytrace lost %.0f spans (acked, never exported) in %.0f of %d repeats", lost, lostReps, b.sz.repeats))
	}
	rows := []row{
		merge,
		pair(gMerge, "collector CPU s per 1M spans, subagentmerge vs groupbytrace", "CPU s", "subagentmerge", "groupbytrace", cpu, nil),
		pair(gMerge, "collector peak RSS MiB (VmHWM), subagentmerge vs groupbytrace", "MiB", "subagentmerge", "groupbytrace", rss, nil),
		pair(gMerge, "end-to-end spans/s, subagentmerge vs pass-through", "spans/s", "subagentmerge", "passthrough", rate, nil),
		pair(gMerge, "collector CPU s per 1M spans, subagentmerge vs pass-through", "CPU s", "subagentmerge", "passthrough", cpu, nil),
		pair(gMerge, "collector peak RSS MiB (VmHWM), subagentmerge vs pass-through", "MiB", "subagentmerge", "passthrough", rss, nil),

		pair(gSide, "end-to-end spans/s, shipped sidecar vs bare collector", "spans/s", "shipped", "passthrough", rate, nil),
		pair(gSide, "collector CPU s per 1M spans, shipped sidecar vs bare collector", "CPU s", "shipped", "passthrough", cpu, nil),
		pair(gSide, "collector peak RSS MiB (VmHWM), shipped sidecar vs bare collector", "MiB", "shipped", "passthrough", rss, nil),
	}
	rows = append(rows, b.sidecarRows(pair, get, errs)...)
	ls := pair(gLS, "end-to-end spans/s, langsmith vs otlphttp JSON", "spans/s", "langsmith", "otlphttp_json", rate,
		&target{">=", 0.5, "≥ 0.5× otlphttp JSON (with flat memory)"})
	lsCPU := pair(gLS, "collector CPU s per 1M spans, langsmith vs otlphttp JSON", "CPU s", "langsmith", "otlphttp_json", cpu, nil)
	lsWire := pair(gLS, "bytes per span on the wire, langsmith vs otlphttp JSON", "B", "langsmith", "otlphttp_json", wire, nil)
	ls.facts = exporterFacts(lsCPU, lsWire, "otlphttp JSON")
	rows = append(rows, ls, lsCPU,
		pair(gLS, "collector peak RSS MiB (VmHWM), langsmith vs otlphttp JSON", "MiB", "langsmith", "otlphttp_json", rss, nil),
		lsWire)

	// all three from the large run: at its end against when the first `small` runs were acked
	atMark := func(label, unit string, end, mark func(load) float64, t *target) row {
		r := row{group: gLSScale, label: label, unit: unit, oursIs: "after " + large, peerIs: "after " + small, target: t}
		err := firstErr(errs, "langsmith_large")
		if r.ours, r.peer, r.ratio = series(get("langsmith_large", end), get("langsmith_large", mark)); len(r.ratio) == 0 {
			if err == nil {
				err = fmt.Errorf("the load generator did not report its figures after %s runs", small)
			}
			fr := failedRow(gLSScale, label, err)
			fr.target = t
			return fr
		}
		if err != nil {
			r.warn = fmt.Sprintf("%d of %d repeats; %s", len(r.ratio), b.sz.repeats, strings.SplitN(err.Error(), "\n", 2)[0])
		}
		return r
	}
	flat := atMark(fmt.Sprintf("langsmith collector peak RSS MiB (VmHWM), after %s vs after %s runs", large, small), "MiB",
		rss, func(l load) float64 { return l.MarkRSS }, &target{"<=", 1.25, "flat: ≤ 1.25×"})
	if flat.err == "" {
		flat.facts = append(flat.facts,
			fmt.Sprintf("peak RSS was %s MiB after %s runs and %s MiB after %s runs (medians); a retained 1 KiB per run would add about %s MiB between the two",
				num(median(flat.ours)), large, num(median(flat.peer)), small, num(float64(b.sz.lsLarge-b.sz.e2eSpans)/1024)))
	}
	rows = append(rows,
		atMark(fmt.Sprintf("langsmith runs/s, %s vs first %s runs", large, small), "runs/s",
			rate, func(l load) float64 { return float64(b.sz.e2eSpans) / l.MarkS }, nil),
		atMark(fmt.Sprintf("langsmith collector CPU µs per run, %s vs first %s runs", large, small), "CPU µs",
			cpuPerRun, func(l load) float64 { return l.MarkCPU / float64(b.sz.e2eSpans) * 1e6 }, nil),
		flat)

	lf := pair(gLF, "end-to-end spans/s, langfuse vs otlphttp", "spans/s", "langfuse", "otlphttp", rate, &target{">=", 0.8, "≥ 0.8× otlphttp"})
	lfCPU := pair(gLF, "collector CPU s per 1M spans, langfuse vs otlphttp", "CPU s", "langfuse", "otlphttp", cpu, nil)
	lfWire := pair(gLF, "bytes per span on the wire, langfuse vs otlphttp", "B", "langfuse", "otlphttp", wire, nil)
	lf.facts = exporterFacts(lfCPU, lfWire, "otlphttp")
	rows = append(rows, lf, lfCPU,
		pair(gLF, "collector peak RSS MiB (VmHWM), langfuse vs otlphttp", "MiB", "langfuse", "otlphttp", rss, nil),
		lfWire)
	return rows
}

func passShare(r float64) string {
	if r >= 0.8 {
		return "the collector's own path (receive, batch, export) and the load generator sharing the machine's cores cap both pipelines: the merge adds little to a span's cost, and groupbytrace's gap is the ceiling, not the merge"
	}
	return "the merge itself, not the collector's own path, is the limit here"
}

func exporterFacts(cpu, wire row, peer string) []string {
	if cpu.err != "" || wire.err != "" {
		return nil
	}
	return []string{
		fmt.Sprintf("the exporter used %.2f× the collector CPU per span of %s (median %s against %s CPU s per 1M spans)",
			median(cpu.ratio), peer, num(median(cpu.ours)), num(median(cpu.peer))),
		fmt.Sprintf("it sent %.2f× the bytes per span (median %s B against %s B, as compressed on the wire)",
			median(wire.ratio), num(median(wire.ours)), num(median(wire.peer))),
	}
}

func firstErr(errs map[string]error, ids ...string) error {
	for _, id := range ids {
		if err := errs[id]; err != nil {
			return err // runLoad's errors start with the run's name
		}
	}
	return nil
}

// nanLoad stands for a failed run: every figure derived from it is NaN, so the repeat
// counts for neither side of a pair.
func nanLoad() load {
	n := math.NaN()
	return load{Acked: n, Rate: n, CPU: n, PeakRSS: n, MarkS: n, MarkCPU: n, MarkRSS: n, SinkB: n, SinkReqs: n}
}

// oneRun runs one collector configuration under load; runs go one at a time, so what the
// sink received during the run is the run's.
func (b *bench) oneRun(spec runSpec, rep int, sk *sink) (load, error) {
	cr, err := spec.build(b, sk)
	if err != nil {
		return load{}, err
	}
	spans, hard := b.sz.e2eSpans, b.sz.runHard
	if spec.large {
		spans, hard = b.sz.lsLarge, b.sz.largeHard
	}
	l, err := b.runLoad(cr, spans, hard, sk)
	if err != nil {
		return load{}, err
	}
	extra := ""
	if l.Lost > 0 {
		extra = fmt.Sprintf(", lost %.0f", l.Lost)
	}
	if l.SinkB > 0 {
		extra += fmt.Sprintf(", %.0f B/span on the wire", l.BytesPerSpan())
	}
	if l.MarkRSS > 0 {
		extra += fmt.Sprintf(", peak RSS %.1f MiB after %s spans", l.MarkRSS, humanCount(cr.mark))
	}
	b.progress("  repeat %d/%d %-16s %8.0f spans: %8s spans/s, %6.2f CPU s/1M spans, peak RSS %6.1f MiB%s",
		rep, b.sz.repeats, strings.ReplaceAll(spec.id, "_", " "), l.Acked, num(l.Rate), l.CPUPerMillion(), l.PeakRSS, extra)
	return l, nil
}
