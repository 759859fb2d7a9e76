package main

import (
	"fmt"
	"strings"
	"time"
)

// latencyRows runs the real-time replay (internal/e2e BenchmarkSidecarLatency): DeerFlow-
// shaped runs and untraced-task runs, each span sent as it ends, through the shipped
// sidecar into the LangSmith and Langfuse fakes and through a stock collector into the
// Langfuse fake; one -count run per repeat, the two sides back to back.
func (b *bench) latencyRows() []row {
	g := fmt.Sprintf("Latency: real-time replay of %d agent runs of %s (plus %d whose `task` is never traced), each span sent as it ends in a request of its own, until it is at every vendor fake (go test -bench SidecarLatency)",
		b.sz.latRuns, b.sz.latRun, b.sz.latUntraced)
	labels := struct{ p50, p95, p95t, un, unt string }{
		p50:  "span latency p50 s (sent → at every vendor), shipped sidecar vs stock collector",
		p95:  "span latency p95 s (sent → at every vendor), shipped sidecar vs stock collector",
		p95t: "shipped sidecar span latency p95 s",
		un:   "untraced-task run out, s after its root was sent, shipped sidecar vs stock collector",
		unt:  "shipped sidecar untraced-task run out, s after its root",
	}
	p95Target := &target{"<=", 2.5, "≤ 2.5 s"}
	unTarget := &target{"<=", 3, "≤ 3 s after its root"}
	fail := func(err error) []row {
		return []row{failedRow(g, labels.p50, err), failedRow(g, labels.p95, err), withTarget(failedRow(g, labels.p95t, err), p95Target),
			failedRow(g, labels.un, err), withTarget(failedRow(g, labels.unt, err), unTarget)}
	}
	b.progress("latency: go test -tags e2e -bench SidecarLatency ./internal/e2e/ (count %d)", b.sz.repeats)
	env := []string{"AGENTMETER_COLLECTOR=" + b.collector,
		fmt.Sprintf("BENCH_LATENCY_RUNS=%d", b.sz.latRuns), fmt.Sprintf("BENCH_LATENCY_UNTRACED=%d", b.sz.latUntraced),
		"BENCH_LATENCY_RUN=" + b.sz.latRun.String(), "BENCH_LATENCY_WAIT=" + b.sz.latWait.String()}
	res, err := b.goBenchWith([]string{"-tags", "e2e"}, env, "./internal/e2e/", "SidecarLatency", "1x", b.sz.repeats, b.sz.latHard)
	if err != nil {
		return fail(err)
	}
	const ship, stock = "BenchmarkSidecarLatency/shipped", "BenchmarkSidecarLatency/stock"
	get := func(name, unit string) []float64 {
		v, e := res.metric(name, unit)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	sp50, sp95, sun, sunseen := get(ship, "p50_s"), get(ship, "p95_s"), get(ship, "untraced_out_s"), get(ship, "unseen")
	kp50, kp95, kun := get(stock, "p50_s"), get(stock, "p95_s"), get(stock, "untraced_out_s")
	if err != nil {
		return fail(err)
	}
	pairRow := func(label string, o, p []float64) row {
		o, p, r := series(o, p)
		return row{group: g, label: label, unit: "s", ours: o, peer: p, ratio: r, oursIs: "shipped", peerIs: "stock"}
	}
	p95 := row{group: g, label: labels.p95t, unit: "s", ours: sp95, oursIs: "shipped", target: p95Target}
	un := row{group: g, label: labels.unt, unit: "s", ours: sun, oursIs: "shipped", target: unTarget}
	// each vendor alone: which of the two exporters holds spans, when one does
	var perVendor []string
	for _, v := range []string{"langsmith", "langfuse"} {
		if x, e := res.metric(ship, "p95_"+v+"_s"); e == nil {
			perVendor = append(perVendor, fmt.Sprintf("%s %s s", v, num(median(x))))
		}
	}
	if len(perVendor) > 0 {
		p95.facts = append(p95.facts, "p95 at each vendor alone (medians): "+strings.Join(perVendor, ", "))
	}
	if m := median(sunseen); m > 0 {
		note := fmt.Sprintf("%.0f spans (median of the repeats) were not at every vendor when the wait of %s after the last send ended; each counts as that wait, so the figures are lower bounds",
			m, b.sz.latWait)
		p95.facts, un.facts = append(p95.facts, note), append(un.facts, note)
	}
	b.progress("  latency p95: shipped %s s, stock %s s; untraced-task run out after %s s (stock %s s)",
		num(median(sp95)), num(median(kp95)), num(median(sun)), num(median(kun)))
	return []row{pairRow(labels.p50, sp50, kp50), pairRow(labels.p95, sp95, kp95), p95, pairRow(labels.un, sun, kun), un}
}

// latencySizes are the replay's sizes of one mode.
type latencySizes struct {
	latRuns, latUntraced int
	latRun, latWait      time.Duration
	latHard              time.Duration // the whole `go test` (compiling and every repeat)
}
