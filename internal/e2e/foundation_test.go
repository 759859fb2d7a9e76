//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Every module named in builder-config.yaml must be compiled into the distribution.
func TestComponentsListsEveryManifestModule(t *testing.T) {
	bin := CollectorBinary(t)
	manifest, err := os.ReadFile(filepath.Join(RepoRoot(), "builder-config.yaml"))
	require.NoError(t, err)
	out, err := exec.Command(bin, "components").CombinedOutput()
	require.NoError(t, err, string(out))
	listed := string(out)

	gomod := regexp.MustCompile(`(?m)^\s*-\s*gomod:\s*(\S+)\s+(\S+)`)
	checked := 0
	for _, line := range strings.Split(string(manifest), "\n") {
		m := gomod.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if strings.Contains(m[1], "confmap/provider") {
			continue // providers are listed by scheme, not module
		}
		// our own components share one module, github.com/agentmeter/agentmeter v0.0.0
		assert.Contains(t, listed, m[1]+" "+m[2], "manifest module missing from `components`")
		checked++
	}
	assert.GreaterOrEqual(t, checked, 10, "the manifest parse found too few modules")
	for _, typ := range []string{"otlp", "memory_limiter", "batch", "debug", "otlp_http", "prometheus",
		"load_balancing", "file", "health_check", "pprof", "file_storage", "signal_to_metrics", "delta_to_cumulative", "groupbytrace", "otlp_grpc", "tokenmetrics"} {
		assert.Regexp(t, `(?m)name: `+regexp.QuoteMeta(typ)+`\n`, listed, "component type %s", typ)
	}
}

// OTLP in, file exporter out: the spans and their usage attributes arrive unchanged.
func TestOTLPRoundTripKeepsUsage(t *testing.T) {
	sink := StartTraceSink(t, t.TempDir())

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(genai.AttrServiceName, "e2e")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3})
	sp.SetSpanID(pcommon.SpanID{4, 5, 6})
	sp.SetName(genai.SpanName(genai.OpChat, "gpt-4o"))
	sp.Attributes().PutStr(genai.AttrOperationName, genai.OpChat)
	want := genai.Usage{Input: 120, Output: 30, CacheRead: 100, Reasoning: 12}
	genai.PutUsage(sp.Attributes(), want)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, SendOTLPHTTP(ctx, sink.OTLP, td))

	spans := WaitForSpans(t, sink.Traces, 1, 20*time.Second)
	require.Len(t, spans, 1)
	assert.Equal(t, "chat gpt-4o", spans[0].Name())
	got, ok := genai.UsageFromMap(spans[0].Attributes())
	require.True(t, ok)
	assert.Equal(t, want, got)
}
