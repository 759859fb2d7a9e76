// Command compare runs every comparison of docs/performance.md in one run, on this
// machine, and writes that page: our components against what a user would pick instead
// (contrib groupbytrace, the stock otlphttp exporter, the stock otlp receiver, a bare
// collector), each pair back to back in every repeat on the same generated DeerFlow-shaped
// load, with the ratio of each repeat and min / median / max over the repeats.
//
// bench/compare.sh is the entry point (`make bench-compare`); it builds this program, the
// load generator (bench/subagentmerge_loadgen) and the collector, then runs:
//
//	compare -repo . -collector bin/agentmeter-collector -loadgen <path> -out docs/performance.md [-smoke]
//
// Every step has a hard timeout; -smoke runs tiny counts (seconds per step) so a test can
// keep the whole chain working, and its figures mean nothing.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// sizes are the counts and time bounds of one mode.
type sizes struct {
	repeats   int
	e2eSpans  int           // spans per end-to-end run (also the langsmith small run count)
	lsLarge   int           // runs of the langsmith large run
	gbtWait   time.Duration // groupbytrace wait_duration
	runHard   time.Duration // bound of one collector run
	largeHard time.Duration // bound of the langsmith large run
	heapTime  string        // -benchtime of the heap-per-buffered-span benchmark
	auTime    string        // -benchtime of the agentusage benchmark
	mwTime    string        // -benchtime of the middleware chain benchmark
	costTime  string        // -benchtime of the cost step benchmark
	stepTime  string        // -benchtime of the per-span step benchmarks
	gwRuns    int
	gwThreads int
	benchHard time.Duration // bound of one `go test -bench` (compiling included)
	gwHard    time.Duration
	budget    time.Duration // the whole run: steps past it fail as skipped
	latencySizes
}

var (
	full = sizes{repeats: 3, e2eSpans: 200_000, lsLarge: 1_000_000, gbtWait: 5 * time.Second,
		runHard: 3 * time.Minute, largeHard: 4 * time.Minute, heapTime: "1x", auTime: "1s", mwTime: "1000x", stepTime: "1s", costTime: "5000x",
		gwRuns: 500, gwThreads: 500, benchHard: 5 * time.Minute, gwHard: 3 * time.Minute, budget: 26 * time.Minute,
		latencySizes: latencySizes{latRuns: 8, latUntraced: 2, latRun: 30 * time.Second, latWait: 40 * time.Second, latHard: 8 * time.Minute}}
	// smoke: tiny, but the first e2eSpans langsmith runs must take many of the collector's
	// 10 ms CPU ticks (/proc/<pid>/stat), or the CPU at the mark can read 0; at 3,000 runs
	// (about three ticks) it did
	smoke = sizes{repeats: 1, e2eSpans: 10_000, lsLarge: 50_000, gbtWait: time.Second,
		runHard: time.Minute, largeHard: time.Minute, heapTime: "1x", auTime: "20x", mwTime: "3x", stepTime: "3x", costTime: "100x",
		gwRuns: 20, gwThreads: 20, benchHard: 5 * time.Minute, gwHard: 2 * time.Minute, budget: 10 * time.Minute,
		latencySizes: latencySizes{latRuns: 2, latUntraced: 1, latRun: 3 * time.Second, latWait: 12 * time.Second, latHard: 4 * time.Minute}}
)

type bench struct {
	repo, collector, loadgen, tmp string
	smoke                         bool
	sz                            sizes
	start                         time.Time
	machine                       machine
}

func main() {
	var (
		repo      = flag.String("repo", ".", "repository root")
		collector = flag.String("collector", "bin/agentmeter-collector", "ocb-built collector")
		loadgen   = flag.String("loadgen", "", "built bench/subagentmerge_loadgen")
		out       = flag.String("out", "docs/performance.md", "page to write")
		smokeMode = flag.Bool("smoke", false, "tiny counts, seconds per step: checks the chain, the figures mean nothing")
		repeats   = flag.Int("repeats", 0, "repeats of every measure (default 3, smoke 1)")
		spans     = flag.Int("spans", 0, "spans per end-to-end run (default 200000, smoke 3000)")
		largeRuns = flag.Int("large-runs", 0, "runs of the langsmith large run (default 1000000, smoke 15000)")
	)
	flag.Parse()
	b := &bench{smoke: *smokeMode, sz: full, start: time.Now()}
	if b.smoke {
		b.sz = smoke
	}
	if *repeats > 0 {
		b.sz.repeats = *repeats
	}
	if *spans > 0 {
		b.sz.e2eSpans = *spans
	}
	if *largeRuns > 0 {
		b.sz.lsLarge = *largeRuns
	}
	var err error
	for _, p := range []*string{repo, collector, loadgen, out} {
		if *p == "" {
			fmt.Fprintln(os.Stderr, "compare: -repo, -collector, -loadgen and -out are required")
			os.Exit(2)
		}
		if *p, err = filepath.Abs(*p); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(2)
		}
	}
	b.repo, b.collector, b.loadgen = *repo, *collector, *loadgen
	if b.tmp, err = os.MkdirTemp("", "agentmeter-bench-compare-"); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(b.tmp)
	b.machine = readMachine(b.repo)
	mode := "full"
	if b.smoke {
		mode = "SMOKE (tiny counts; the figures mean nothing)"
	}
	b.progress("bench-compare, %s: %d repeats, %d spans per end-to-end run, %d cores, load average %s",
		mode, b.sz.repeats, b.sz.e2eSpans, b.machine.cores, b.machine.loadStart)

	rows := b.run()
	b.machine.loadEnd = loadAvg()
	page := b.render(rows, keptNotes(*out, filepath.Join(b.repo, "docs", "performance.md")))
	if err := os.WriteFile(*out, []byte(page), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "compare: write", *out, err)
		os.Exit(1)
	}
	failed := 0
	for _, r := range rows {
		if r.err != "" || r.warn != "" {
			failed++
		}
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "- **met**") || strings.HasPrefix(line, "- **missed**") || strings.HasPrefix(line, "- **failed") {
			fmt.Println(strings.ReplaceAll(line, "**", ""))
		}
	}
	b.progress("wrote %s (%d rows, %d failed in some or all repeats)", *out, len(rows), failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// bound is a step's timeout: its own hard limit, cut to what is left of the run's budget.
func (b *bench) bound(hard time.Duration) (time.Duration, error) {
	left := b.sz.budget - time.Since(b.start)
	if left <= 0 {
		return 0, fmt.Errorf("skipped: the run's time budget of %s is spent", b.sz.budget)
	}
	return min(hard, left), nil
}

func (b *bench) progress(format string, args ...any) {
	el := time.Since(b.start).Round(time.Second)
	fmt.Printf("[%02d:%02d] %s\n", int(el.Minutes()), int(el.Seconds())%60, fmt.Sprintf(format, args...))
}

// run measures everything and returns the table's rows, in order.
func (b *bench) run() []row {
	var rows []row
	rows = append(rows, b.collectorPairs()...)
	rows = append(rows, b.latencyRows()...)
	rows = append(rows, b.inProcess()...)
	rows = append(rows, b.gatewayRows()...)
	return rows
}

// --- rows -------------------------------------------------------------------------------

// target is a goal on the median ratio (or, without a peer, on our median).
type target struct {
	op   string // ">=", "<=", "<"
	v    float64
	text string // as the issue states it
}

func (t *target) met(x float64) bool {
	switch t.op {
	case ">=":
		return x >= t.v
	case "<=":
		return x <= t.v
	case "<":
		return x < t.v
	}
	return false
}

type row struct {
	group  string // heading the row sits under
	label  string
	unit   string
	ours   []float64
	peer   []float64 // nil: no peer
	ratio  []float64 // per repeat, ours / peer
	oursIs string    // what "ours" is, for the columns' sake
	peerIs string
	target *target
	err    string   // nothing measured
	warn   string   // measured in some repeats only: which, and the first error
	facts  []string // measured facts shown when the target is missed
}

func (r row) hasPeer() bool { return r.peerIs != "" }

// judged is the value the target is checked on.
func (r row) judged() float64 {
	if r.hasPeer() {
		return median(r.ratio)
	}
	return median(r.ours)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// series builds a row from per-repeat pairs; a repeat where either side failed counts
// for neither.
func series(ours, peer []float64) (o, p, ratio []float64) {
	for i := range ours {
		if i >= len(peer) || math.IsNaN(ours[i]) || math.IsNaN(peer[i]) {
			continue
		}
		o, p = append(o, ours[i]), append(p, peer[i])
		ratio = append(ratio, ours[i]/peer[i])
	}
	return o, p, ratio
}

func failedRow(group, label string, err error) row {
	msg := strings.SplitN(err.Error(), "\n", 2)[0]
	return row{group: group, label: label, err: msg}
}

func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func keptNotes(paths ...string) string {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.Index(s, notesBegin), strings.Index(s, notesEnd)
		if i >= 0 && j > i {
			return strings.TrimSpace(s[i+len(notesBegin) : j])
		}
	}
	return strings.TrimSpace(defaultNotes)
}
