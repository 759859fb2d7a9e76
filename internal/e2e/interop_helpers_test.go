//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// InteropDir holds the node project with the real agent frameworks and instrumentations
// (test/interop): one script per library, each the same two-agent app.
func InteropDir() string { return interopProject.dir() }

// RunInterop runs one script of test/interop with extra environment variables and
// returns its standard output; a non-zero exit fails the test with the script's output.
// The scripts reach nothing but loopback: the fake model, the collector.
func RunInterop(t testing.TB, script string, env ...string) string {
	t.Helper()
	// no proxy, no vendor keys of the developer's shell: the scripts set what they need
	base := []string{"NO_PROXY=127.0.0.1,localhost", "OTEL_SDK_DISABLED=false",
		"LANGSMITH_API_KEY=test-key", "OPENAI_API_KEY=sk-fake-interop", "TRACELOOP_SYNC_ENABLED=false",
		"TRACELOOP_TELEMETRY=false"}
	out, stderr := interopProject.run(t, 90*time.Second, script, append(base, env...)...)
	if stderr != "" {
		t.Logf("node %s stderr:\n%s", script, stderr)
	}
	return out
}

// interopOverlay is merged over the shipped otelcol-config.yaml (with
// confmap.enableMergeAppendOption): the merged pipeline (traces) also writes
// what it exports to file/out, and another pipeline writes what the receivers produced, before any
// processor, to file/raw (the library's own spans, or the receiver face's output).
const interopOverlay = `
exporters:
  file/out: {path: "${env:AGENTMETER_INTEROP_OUT}", format: json, flush_interval: 100ms}
  file/raw: {path: "${env:AGENTMETER_INTEROP_RAW}", format: json, flush_interval: 100ms}
service:
  pipelines:
    traces:
      exporters: [file/out]
    traces/raw:
      receivers: [otlp, agentusage]
      exporters: [file/raw]
`

// InteropCollector is the shipped collector with the interop overlay.
type InteropCollector struct {
	Ports    sidecarPorts
	Out, Raw string // file exporter outputs: after the pipeline, and as received
}

// StartInteropCollector runs the collector on otelcol-config.yaml (ports moved by the
// AGENTMETER_* variables) plus interopOverlay, and waits until OTLP/HTTP and the
// agentusage receiver accept connections.
func StartInteropCollector(t *testing.T) *InteropCollector {
	t.Helper()
	c := &InteropCollector{Ports: setSidecarEnv(t)}
	dir := t.TempDir()
	c.Out, c.Raw = filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "raw.jsonl")
	t.Setenv("AGENTMETER_INTEROP_OUT", c.Out)
	t.Setenv("AGENTMETER_INTEROP_RAW", c.Raw)
	overlay := filepath.Join(dir, "interop-overlay.yaml")
	if err := os.WriteFile(overlay, []byte(interopOverlay), 0o600); err != nil {
		t.Fatalf("write overlay: %v", err)
	}
	col := StartWithArgs(t, dir, c.Ports.OTLPHTTP,
		"--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
		"--config", overlay,
		"--feature-gates=confmap.enableMergeAppendOption")
	if err := col.waitTCP(c.Ports.AgentUsage, 30*time.Second); err != nil {
		t.Fatalf("agentusage receiver not ready: %v", err)
	}
	return c
}

// Env is the environment an interop script needs to reach the fake and the collector.
func (c *InteropCollector) Env(model *FakeModel) []string {
	return []string{
		"FAKE_MODEL_URL=" + model.URL,
		"OTLP_ENDPOINT=http://" + c.Ports.OTLPHTTP,
		"LANGSMITH_ENDPOINT=http://" + c.Ports.AgentUsage,
		"LANGFUSE_BASE_URL=http://" + c.Ports.AgentUsage,
	}
}

// WriteFixture writes spans as one OTLP JSON document (ExportTraceServiceRequest) to
// path, for golden tests downstream. The spans are grouped under their resource and scope
// as received (resource attributes other than service.name and telemetry.sdk.* dropped),
// sorted by start time, so a re-capture diffs by content, not by batching.
func WriteFixture(t testing.TB, path string, tds []ptrace.Traces) {
	t.Helper()
	out := ptrace.NewTraces()
	type key struct{ res, scope string }
	groups := map[key]ptrace.SpanSlice{}
	var order []key
	for _, td := range tds {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			resJSON, _ := json.Marshal(rs.Resource().Attributes().AsRaw())
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				k := key{string(resJSON), ss.Scope().Name() + "@" + ss.Scope().Version()}
				dst, ok := groups[k]
				if !ok {
					nrs := out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					// host and process details of the machine that captured it say nothing
					// about the library's conventions
					nrs.Resource().Attributes().RemoveIf(func(k string, _ pcommon.Value) bool {
						return k != "service.name" && !strings.HasPrefix(k, "telemetry.sdk.")
					})
					nrs.SetSchemaUrl(rs.SchemaUrl())
					nss := nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(nss.Scope())
					nss.SetSchemaUrl(ss.SchemaUrl())
					dst = nss.Spans()
					groups[k] = dst
					order = append(order, k)
				}
				ss.Spans().MoveAndAppendTo(dst)
			}
		}
	}
	for _, k := range order {
		groups[k].Sort(func(a, b ptrace.Span) bool {
			if a.StartTimestamp() != b.StartTimestamp() {
				return a.StartTimestamp() < b.StartTimestamp()
			}
			return a.SpanID().String() < b.SpanID().String()
		})
	}
	var m ptrace.JSONMarshaler
	raw, err := m.MarshalTraces(out)
	if err != nil {
		t.Fatalf("marshal fixture: %v", err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", " "); err != nil {
		t.Fatalf("indent fixture: %v", err)
	}
	pretty.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("fixture dir: %v", err)
	}
	if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
		t.Fatalf("write fixture: %v", err)
	}
}

// spanNames lists span names, sorted, for failure messages.
func spanNames(spans []ptrace.Span) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Name())
	}
	sort.Strings(out)
	return out
}

// attrsString renders a span's attributes for failure messages.
func attrsString(m pcommon.Map) string {
	b, _ := json.Marshal(m.AsRaw())
	return string(b)
}
