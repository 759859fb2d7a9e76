package main

import (
	"fmt"
	"math"
)

// inProcess runs the benchmarks that compare inside one Go process: heap per buffered
// span, the agentusage faces against the otlp receiver, the middleware chain, the cost step.
func (b *bench) inProcess() []row {
	var rows []row
	n := b.sz.repeats

	gHeap := "subagentmerge, in process (go test -bench HeapPerBufferedSpan: 2,000 unfinished runs held)"
	heapLabel := "heap bytes per buffered span, subagentmerge vs groupbytrace"
	heapTarget := &target{"<=", 0.5, "≤ 0.5× groupbytrace"}
	b.progress("heap per buffered span: go test -bench HeapPerBufferedSpan ./processor/subagentmerge/ (count %d)", n)
	if res, err := b.goBench("./processor/subagentmerge/", "HeapPerBufferedSpan/^(groupbytrace|subagentmerge)$", b.sz.heapTime, n, b.sz.benchHard); err != nil {
		rows = append(rows, withTarget(failedRow(gHeap, heapLabel, err), heapTarget))
	} else {
		ours, err1 := res.metric("BenchmarkHeapPerBufferedSpan/subagentmerge", "heapB/span")
		peer, err2 := res.metric("BenchmarkHeapPerBufferedSpan/groupbytrace", "heapB/span")
		if err := firstNonNil(err1, err2); err != nil {
			rows = append(rows, withTarget(failedRow(gHeap, heapLabel, err), heapTarget))
		} else {
			o, p, r := series(ours, peer)
			rows = append(rows, row{group: gHeap, label: heapLabel, unit: "B", ours: o, peer: p, ratio: r,
				oursIs: "subagentmerge", peerIs: "groupbytrace", target: heapTarget})
			b.progress("  heap per buffered span: subagentmerge %s B, groupbytrace %s B", num(median(o)), num(median(p)))
		}
	}

	gAU := "agentusage receiver faces vs the stock otlp receiver (OTLP/HTTP protobuf of the same records), loopback HTTP into a nop consumer (go test -bench ThroughputVsOTLP)"
	faces := []struct{ id, label string }{
		{"native", "native /v1/usage"},
		{"langsmith_batch", "LangSmith /runs/batch"},
		{"langsmith_multipart", "LangSmith /runs/multipart"},
		{"langfuse_otlp", "Langfuse OTLP"},
		{"langfuse_ingestion", "Langfuse legacy ingestion"},
	}
	b.progress("agentusage faces: go test -bench ThroughputVsOTLP ./receiver/agentusage/ (count %d)", n)
	res, err := b.goBench("./receiver/agentusage/", "ThroughputVsOTLP", b.sz.auTime, n, b.sz.benchHard)
	for _, f := range faces {
		label := fmt.Sprintf("records/s, %s vs otlp", f.label)
		auTarget := &target{">=", 0.5, "≥ 0.5× otlp"}
		if err != nil {
			rows = append(rows, withTarget(failedRow(gAU, label, err), auTarget))
			continue
		}
		ours, err1 := res.metric("BenchmarkThroughputVsOTLP/"+f.id+"/agentusage", "records/s")
		peer, err2 := res.metric("BenchmarkThroughputVsOTLP/"+f.id+"/otlp", "records/s")
		if e := firstNonNil(err1, err2); e != nil {
			rows = append(rows, withTarget(failedRow(gAU, label, e), auTarget))
			continue
		}
		o, p, r := series(ours, peer)
		rw := row{group: gAU, label: label, unit: "records/s", ours: o, peer: p, ratio: r,
			oursIs: "agentusage " + f.id, peerIs: "otlp", target: auTarget}
		if js, e := res.metric("BenchmarkThroughputVsOTLP/"+f.id+"/otlp_json", "records/s"); e == nil {
			_, _, rj := series(o, js)
			rw.facts = append(rw.facts, fmt.Sprintf("against the otlp receiver fed OTLP/HTTP JSON of the same records (the like-for-like text format) the face ran at %.2f× (median)", median(rj)))
		}
		rows = append(rows, rw)
		b.progress("  %s: %s records/s vs otlp %s (%.2f×)", f.id, num(median(o)), num(median(p)), median(r))
	}

	rows = append(rows, b.stepRows()...)

	gMW := "middleware chain (every middleware on, the title call included) vs the bare agent loop, instant model (go test -bench ChainOverheadMedian)"
	b.progress("middleware chain: go test -bench ChainOverheadMedian ./middleware/ (count %d)", n)
	mw, err := b.goBench("./middleware/", "ChainOverheadMedian", b.sz.mwTime, n, b.sz.benchHard)
	const mwName = "BenchmarkChainOverheadMedian"
	perCall := "µs per model call, full chain vs bare loop"
	over := "chain overhead µs per model call (full − bare, wall time)"
	overCPU := "chain overhead µs per model call (full − bare, process CPU time)"
	overTarget := &target{"<", 50, "< 50 µs per call"}
	if err != nil {
		rows = append(rows, failedRow(gMW, perCall, err), withTarget(failedRow(gMW, over, err), overTarget), failedRow(gMW, overCPU, err))
	} else {
		full, e1 := mw.metric(mwName, "full-µs/call")
		bare, e2 := mw.metric(mwName, "bare-µs/call")
		ov, e3 := mw.metric(mwName, "overhead-µs/call")
		ovc, e4 := mw.metric(mwName, "overhead-cpu-µs/call")
		if e := firstNonNil(e1, e2, e3, e4); e != nil {
			rows = append(rows, failedRow(gMW, perCall, e), withTarget(failedRow(gMW, over, e), overTarget), failedRow(gMW, overCPU, e))
		} else {
			o, p, r := series(full, bare)
			rows = append(rows,
				row{group: gMW, label: perCall, unit: "µs", ours: o, peer: p, ratio: r, oursIs: "full chain", peerIs: "bare loop"},
				row{group: gMW, label: over, unit: "µs", ours: ov, oursIs: "overhead", target: overTarget,
					facts: []string{fmt.Sprintf("a model call took %s µs through the full chain and %s µs through the bare loop (medians)", num(median(o)), num(median(p)))}},
				row{group: gMW, label: overCPU, unit: "µs", ours: ovc, oursIs: "overhead"})
			b.progress("  chain overhead %s µs per call (wall), %s µs (CPU)", num(median(ov)), num(median(ovc)))
		}
	}
	return append(rows, b.costStepRow())
}

// costStepRow is the genaicost cost step per span on the default table (the genai-prices
// dataset) against the 55-row hand-typed table it replaced.
func (b *bench) costStepRow() row {
	g := "genaicost cost step, in process: the genai-prices dataset vs the hand-typed table it replaced (go test -bench CostStep)"
	label := "ns per model-call span, dataset vs hand-typed table"
	t := &target{"<=", 1.1, "≤ 1.1× hand-typed"}
	b.progress("cost step: go test -bench CostStep ./processor/genaicost/ (count %d)", b.sz.repeats)
	res, err := b.goBench("./processor/genaicost/", "CostStep", b.sz.costTime, b.sz.repeats, b.sz.benchHard)
	if err != nil {
		return withTarget(failedRow(g, label, err), t)
	}
	ours, err1 := res.metric("BenchmarkCostStep", "dataset-ns/span")
	peer, err2 := res.metric("BenchmarkCostStep", "handtyped-ns/span")
	if e := firstNonNil(err1, err2); e != nil {
		return withTarget(failedRow(g, label, e), t)
	}
	o, p, r := series(ours, peer)
	b.progress("  cost step: dataset %s ns/span, hand-typed %s ns/span", num(median(o)), num(median(p)))
	return row{group: g, label: label, unit: "ns", ours: o, peer: p, ratio: r, oursIs: "dataset", peerIs: "hand-typed", target: t}
}

// gatewayRows runs bench/gateway.sh (the gateway on the scripted model, every run at
// once, the store verified after) once per repeat.
func (b *bench) gatewayRows() []row {
	g := fmt.Sprintf("gateway (`agentmeter serve`, SQLite, scripted model with a 50 ms call): %d concurrent runs over %d threads, store verified after (bench/gateway.sh)",
		b.sz.gwRuns, b.sz.gwThreads)
	labels := []string{"gateway runs/s", "gateway latency p50 ms (POST ?wait=true)", "gateway latency p99 ms (POST ?wait=true)"}
	var rate, p50, p99 []float64
	var lastErr error
	for rep := 1; rep <= b.sz.repeats; rep++ {
		b.progress("gateway: bench/gateway.sh RUNS=%d THREADS=%d, repeat %d/%d", b.sz.gwRuns, b.sz.gwThreads, rep, b.sz.repeats)
		res, err := b.runGateway(b.sz.gwRuns, b.sz.gwThreads, b.sz.gwHard)
		if err != nil {
			b.progress("  gateway failed: %v", err)
			lastErr = err
			continue
		}
		b.progress("  %s runs/s, p50 %s ms, p99 %s ms", num(res.RunsPerS), num(res.P50ms), num(res.P99ms))
		rate, p50, p99 = append(rate, res.RunsPerS), append(p50, res.P50ms), append(p99, res.P99ms)
	}
	if lastErr != nil {
		return []row{failedRow(g, labels[0], lastErr), failedRow(g, labels[1], lastErr), failedRow(g, labels[2], lastErr)}
	}
	return []row{
		{group: g, label: labels[0], unit: "runs/s", ours: rate, oursIs: "gateway"},
		{group: g, label: labels[1], unit: "ms", ours: p50, oursIs: "gateway"},
		{group: g, label: labels[2], unit: "ms", ours: p99, oursIs: "gateway"},
	}
}

func withTarget(r row, t *target) row {
	r.target = t
	return r
}

func firstNonNil(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// num formats a figure for the table: thousands separated, a few significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case math.Abs(v) >= 1000:
		return commas(int64(math.Round(v)))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func commas(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// stepRows are the sidecar's own per-span steps outside the merge and the exporters, on
// the bench-compare load (bench/agentrun), in process: what each costs a span.
func (b *bench) stepRows() []row {
	g := "The sidecar's per-span steps outside the merge and the exporters, in process, on the bench-compare load (go test -bench BenchCompareLoad: 20 DeerFlow-shaped runs per op)"
	steps := []struct{ pkg, bench, label string }{
		{"./processor/genainormalize/", "BenchmarkBenchCompareLoad", "genainormalize"},
		{"./connector/tokenmetrics/", "BenchmarkConsumeBenchCompareLoad", "tokenmetrics (every metric set, priced calls)"},
	}
	var rows []row
	for _, s := range steps {
		ns, allocs := s.label+" ns per span", s.label+" allocations per op"
		b.progress("%s: go test -bench %s %s (count %d)", s.label, s.bench, s.pkg, b.sz.repeats)
		res, err := b.goBench(s.pkg, "^"+s.bench+"$", b.sz.stepTime, b.sz.repeats, b.sz.benchHard)
		var perSpan, perOp []float64
		if err == nil {
			perSpan, err = res.metric(s.bench, "ns/span")
		}
		if err == nil {
			perOp, err = res.metric(s.bench, "allocs/op")
		}
		if err != nil {
			rows = append(rows, failedRow(g, ns, err), failedRow(g, allocs, err))
			continue
		}
		rows = append(rows, row{group: g, label: ns, unit: "ns", ours: perSpan, oursIs: s.label},
			row{group: g, label: allocs, unit: "allocs", ours: perOp, oursIs: s.label})
		b.progress("  %s: %s ns per span, %s allocations per op", s.label, num(median(perSpan)), num(median(perOp)))
	}
	return rows
}
