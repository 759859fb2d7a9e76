//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// mergeToFileConfig is one collector running subagentmerge between receiver (named
// receiverID, its settings in YAML flow style) and the file exporter writing out.
func mergeToFileConfig(receiverID, receiver, out string) string {
	return fmt.Sprintf(`
receivers:
  %s: %s
processors:
  subagentmerge: {wait_duration: 5s}
exporters:
  file: {path: %q, format: json, flush_interval: 100ms}
service:
  telemetry: {metrics: {level: none}, logs: {level: warn}}
  pipelines:
    traces: {receivers: [%s], processors: [subagentmerge], exporters: [file]}
`, receiverID, receiver, out, receiverID)
}

// mergeTierConfig is one collector running subagentmerge between an OTLP receiver and
// the file exporter; grpcAddr may be empty.
func mergeTierConfig(httpAddr, grpcAddr, out string) string {
	protocols := fmt.Sprintf("http: {endpoint: %q}", httpAddr)
	if grpcAddr != "" {
		protocols += fmt.Sprintf(", grpc: {endpoint: %q}", grpcAddr)
	}
	return mergeToFileConfig("otlp", "{protocols: {"+protocols+"}}", out)
}

func sendRuns(t *testing.T, addr string, runs []uint64) int {
	t.Helper()
	total := 0
	for _, n := range runs {
		early, root := AgentRun(n)
		total += early.SpanCount() + root.SpanCount()
		require.NoError(t, SendOTLPHTTP(context.Background(), addr, early))
		require.NoError(t, SendOTLPHTTP(context.Background(), addr, root))
	}
	return total
}

// OTLP in, merged spans out, through the ocb-built collector.
func TestSubagentMergeThroughCollector(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	dir := t.TempDir()
	out := filepath.Join(dir, "traces.jsonl")
	StartIn(t, dir, mergeTierConfig(addr, "", out), addr)

	n := sendRuns(t, addr, []uint64{1, 2})
	spans := WaitForMergedSpans(t, out, n, time.Second, 30*time.Second)
	require.Len(t, FirstEmissions(spans), n)
	got := MergedDispatches(spans)
	for _, run := range []uint64{1, 2} {
		for k, want := range AgentRunDispatch(run) {
			assert.Equal(t, want, got[k], "dispatch %s", k)
		}
	}
	var in, outUsage genai.Usage
	for _, run := range []uint64{1, 2} {
		early, root := AgentRun(run)
		for _, sp := range append(Spans([]ptrace.Traces{early}), Spans([]ptrace.Traces{root})...) {
			u, _ := genai.UsageFromMap(sp.Attributes())
			in = in.Add(u)
		}
	}
	require.Len(t, CountedVersions(spans), n, "one counted version of each span")
	for _, sp := range CountedVersions(spans) {
		u, _ := genai.UsageFromMap(sp.Attributes())
		outUsage = outUsage.Add(u)
	}
	assert.Equal(t, in, outUsage, "own usage passes through unchanged, counted once")
}

// Scale-out (docs/subagentmerge.md): a front collector routes by trace id with the
// load_balancing exporter into two merge-tier collectors; the merged result is the
// same as one collector's.
func TestSubagentMergeTwoTierMatchesSingleCollector(t *testing.T) {
	runs := make([]uint64, 0, 24)
	for i := uint64(100); i < 124; i++ {
		runs = append(runs, i)
	}

	// reference: one collector
	single := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	singleDir := t.TempDir()
	singleOut := filepath.Join(singleDir, "traces.jsonl")
	StartIn(t, singleDir, mergeTierConfig(single, "", singleOut), single)
	n := sendRuns(t, single, runs)
	want := WaitForMergedSpans(t, singleOut, n, time.Second, 30*time.Second)

	// two merge-tier collectors
	var tierGRPC []string
	var tierOut []string
	for i := 0; i < 2; i++ {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		grpcAddr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		dir := t.TempDir()
		out := filepath.Join(dir, "traces.jsonl")
		StartIn(t, dir, mergeTierConfig(httpAddr, grpcAddr, out), grpcAddr)
		tierGRPC = append(tierGRPC, grpcAddr)
		tierOut = append(tierOut, out)
	}
	front := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	frontCfg := fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      http: {endpoint: %q}
exporters:
  load_balancing:
    routing_key: traceID
    # no queues (here and in protocol.otlp): each batch is acked only once the merge tier has it, so batches of one
    # trace keep their order (a queue's parallel consumers would let a root overtake its
    # children, and the merge tier would see the trace complete too early)
    sending_queue: {enabled: false}
    protocol:
      otlp:
        tls: {insecure: true}
        timeout: 5s
        sending_queue: {enabled: false}
    resolver:
      static:
        hostnames: [%q, %q]
service:
  telemetry: {metrics: {level: none}, logs: {level: warn}}
  pipelines:
    traces: {receivers: [otlp], exporters: [load_balancing]}
`, front, tierGRPC[0], tierGRPC[1])
	Start(t, frontCfg, front)
	require.Equal(t, n, sendRuns(t, front, runs))

	deadline := time.Now().Add(30 * time.Second)
	var got [2][]ptrace.Span
	last, lastChange := -1, time.Now()
	for {
		total, first := 0, 0
		for i, out := range tierOut {
			tds, _ := ReadTraces(out)
			got[i] = Spans(tds)
			total += len(got[i])
			first += len(FirstEmissions(got[i]))
		}
		if total != last {
			last, lastChange = total, time.Now()
		}
		if (first >= n && time.Since(lastChange) >= time.Second) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	assert.NotEmpty(t, got[0], "tier 1 received traces")
	assert.NotEmpty(t, got[1], "tier 2 received traces")
	union := append(append([]ptrace.Span{}, got[0]...), got[1]...)
	require.Len(t, FirstEmissions(union), n)
	assert.Equal(t, CanonicalSpans(want), CanonicalSpans(union), "two-tier result equals the single collector's")
	merged := MergedDispatches(union)
	for _, run := range runs {
		for k, w := range AgentRunDispatch(run) {
			assert.Equal(t, w, merged[k], "dispatch %s", k)
		}
	}
}

// The scale-out example configs shipped in docs/ are valid for the built collector.
func TestSubagentMergeScaleOutExampleConfigsValidate(t *testing.T) {
	bin := CollectorBinary(t)
	for _, f := range []string{"subagentmerge-scaleout-front.yaml", "subagentmerge-scaleout-merge.yaml"} {
		out, err := exec.Command(bin, "validate", "--config", filepath.Join(RepoRoot(), "docs", f)).CombinedOutput()
		assert.NoError(t, err, "%s: %s", f, out)
	}
}
