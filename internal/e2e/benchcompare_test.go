//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make bench-compare` in its smoke mode (tiny counts): the whole chain still runs (every
// collector pair, the in-process benchmarks, the gateway) and the page it writes has
// every row with measured, numeric figures. The output goes to a temporary file, never
// to docs/performance.md.
func TestBenchCompareSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "performance.md")
	cmd := exec.Command(filepath.Join(RepoRoot(), "bench", "compare.sh"))
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "BENCH_SMOKE=1", "BENCH_OUT="+out, "AGENTMETER_COLLECTOR="+CollectorBinary(t))
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "bench/compare.sh:\n%s", log)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	page := string(raw)

	require.Contains(t, page, "SMOKE RUN")
	require.Regexp(t, `\*\*Machine:\*\* \d+ cores \(`+"`nproc`"+`\), .+, \d+\.\d GiB memory`, page)
	require.Regexp(t, `\*\*Date:\*\* \d{4}-\d\d-\d\d \d\d:\d\d UTC`, page)

	// every row the issue asks for: label prefix, and whether it has a peer (and so a ratio)
	want := []struct {
		prefix string
		peer   bool
		target bool
	}{
		{"end-to-end spans/s, subagentmerge vs groupbytrace", true, true},
		{"collector CPU s per 1M spans, subagentmerge vs groupbytrace", true, false},
		{"collector peak RSS MiB (VmHWM), subagentmerge vs groupbytrace", true, false},
		{"end-to-end spans/s, subagentmerge vs pass-through", true, false},
		{"collector CPU s per 1M spans, subagentmerge vs pass-through", true, false},
		{"collector peak RSS MiB (VmHWM), subagentmerge vs pass-through", true, false},
		{"end-to-end spans/s, shipped sidecar vs bare collector", true, false},
		{"collector CPU s per 1M spans, shipped sidecar vs bare collector", true, false},
		{"collector peak RSS MiB (VmHWM), shipped sidecar vs bare collector", true, false},
		{"end-to-end spans/s, shipped sidecar vs stock durable collector", true, true},
		{"collector CPU µs per span, shipped sidecar vs stock durable collector", true, true},
		{"collector peak RSS MiB (VmHWM), shipped sidecar vs stock durable collector", true, false},
		{"shipped sidecar peak RSS MiB (VmHWM)", false, true},
		{"end-to-end spans/s, shipped sidecar vs shipped without subagentmerge", true, false},
		{"collector CPU µs per span, shipped sidecar vs shipped without subagentmerge", true, true},
		{"collector peak RSS MiB (VmHWM), shipped sidecar vs shipped without subagentmerge", true, false},
		{"collector CPU µs per span, shipped sidecar vs shipped without LangSmith's gather", true, false},
		{"collector CPU µs per span, shipped without the gather vs shipped without subagentmerge", true, false},
		{"end-to-end spans/s, langsmith vs otlphttp JSON", true, true},
		{"collector CPU s per 1M spans, langsmith vs otlphttp JSON", true, false},
		{"collector peak RSS MiB (VmHWM), langsmith vs otlphttp JSON", true, false},
		{"bytes per span on the wire, langsmith vs otlphttp JSON", true, false},
		{"langsmith runs/s, ", true, false},
		{"langsmith collector CPU µs per run, ", true, false},
		{"langsmith collector peak RSS MiB (VmHWM), ", true, true},
		{"end-to-end spans/s, langfuse vs otlphttp", true, true},
		{"collector CPU s per 1M spans, langfuse vs otlphttp", true, false},
		{"collector peak RSS MiB (VmHWM), langfuse vs otlphttp", true, false},
		{"bytes per span on the wire, langfuse vs otlphttp", true, false},
		{"span latency p50 s (sent → at every vendor), shipped sidecar vs stock collector", true, false},
		{"span latency p95 s (sent → at every vendor), shipped sidecar vs stock collector", true, false},
		{"shipped sidecar span latency p95 s", false, true},
		{"untraced-task run out, s after its root was sent, shipped sidecar vs stock collector", true, false},
		{"shipped sidecar untraced-task run out, s after its root", false, true},
		{"heap bytes per buffered span, subagentmerge vs groupbytrace", true, true},
		{"records/s, native /v1/usage vs otlp", true, true},
		{"records/s, LangSmith /runs/batch vs otlp", true, true},
		{"records/s, LangSmith /runs/multipart vs otlp", true, true},
		{"records/s, Langfuse OTLP vs otlp", true, true},
		{"records/s, Langfuse legacy ingestion vs otlp", true, true},
		{"genainormalize ns per span", false, false},
		{"genainormalize allocations per op", false, false},
		{"tokenmetrics (every metric set, priced calls) ns per span", false, false},
		{"tokenmetrics (every metric set, priced calls) allocations per op", false, false},
		{"µs per model call, full chain vs bare loop", true, false},
		{"chain overhead µs per model call (full − bare, wall time)", false, true},
		{"chain overhead µs per model call (full − bare, process CPU time)", false, false},
		{"ns per model-call span, dataset vs hand-typed table", true, true},
		{"gateway runs/s", false, false},
		{"gateway latency p50 ms", false, false},
		{"gateway latency p99 ms", false, false},
	}
	var rows [][]string
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| measure ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		require.Len(t, cells, 6, "row %q", line)
		rows = append(rows, cells)
	}
	require.Len(t, rows, len(want), "rows of the table:\n%s", page)
	// min / **median** / max, each a number (thousands separated)
	figures := regexp.MustCompile(`^[0-9][0-9,.]* / \*\*[0-9][0-9,.]*\*\* / [0-9][0-9,.]* \(.+\)$`)
	ratios := regexp.MustCompile(`^[0-9.]+× / \*\*[0-9.]+×\*\* / [0-9.]+×$`)
	for i, w := range want {
		r := rows[i]
		require.True(t, strings.HasPrefix(r[0], w.prefix), "row %d is %q, want %q", i, r[0], w.prefix)
		require.Regexp(t, figures, r[1], "ours of %q", r[0])
		if w.peer {
			require.Regexp(t, figures, r[2], "peer of %q", r[0])
			require.Regexp(t, ratios, r[3], "ratio of %q", r[0])
		} else {
			require.Equal(t, "—", r[2], "peer of %q", r[0])
		}
		if w.target {
			require.NotEmpty(t, r[4], "target of %q", r[0])
			require.Contains(t, []string{"met", "**missed**"}, r[5], "result of %q", r[0])
		} else {
			require.Empty(t, r[5], "result of %q", r[0])
		}
	}
	// the hand-written notes are carried into the page
	require.Contains(t, page, "<!-- notes: bench/compare keeps")
	require.Contains(t, page, "<!-- end of kept notes -->")
}
