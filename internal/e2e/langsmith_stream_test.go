//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// The shipped sidecar streams the runs of an emitter that places its spans (the agentmeter
// runtime) to LangSmith: each span sent the moment it ends, one request each, children
// before their parents, is a run at LangSmith before the root has even been sent, in the
// tree the fake checks. The dispatcher's merged usage, unknown when it went out, reaches
// its run by PATCH, never by a second POST.
func TestShippedSidecarStreamsPlacedRunsToLangSmith(t *testing.T) {
	ports := setSidecarEnv(t)
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	t.Setenv("LANGSMITH_TRACING", "true")
	t.Setenv("LANGSMITH_API_KEY", langSmithTestKey)
	t.Setenv("LANGSMITH_ENDPOINT", fake.URL)
	t.Setenv("LANGSMITH_PROJECT", "e2e-stream")
	c := StartWithArgs(t, t.TempDir(), ports.OTLPHTTP, "--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"))

	td, ids := fakevendor.AgentTrace(5, time.Now().Add(-time.Minute))
	StripMergedUsage(td)
	dottedordertest.Place(td)
	var spans []ptrace.Span
	for sp := range spaniter.All(td) {
		spans = append(spans, sp)
	}
	slices.SortStableFunc(spans, func(a, b ptrace.Span) int { return int(a.EndTimestamp()) - int(b.EndTimestamp()) })
	require.True(t, spans[len(spans)-1].ParentSpanID().IsEmpty(), "the root ends last")
	send := func(sp ptrace.Span) {
		one := ptrace.NewTraces()
		rs := one.ResourceSpans().AppendEmpty()
		td.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		sp.CopyTo(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
		require.NoError(t, SendOTLPHTTP(context.Background(), ports.OTLPHTTP, one))
	}
	for _, sp := range spans[:len(spans)-1] {
		send(sp)
	}
	// the held branch would keep them until the root comes (or wait_duration, 5 minutes)
	require.Eventually(t, func() bool { return fake.RunCount() == len(spans)-1 }, 15*time.Second, 20*time.Millisecond,
		"every run but the root at LangSmith before the root is sent")
	send(spans[len(spans)-1])

	leadChat := dottedorder.SpanUUID(ids.LeadChat)
	merged := func() any {
		md, _ := fake.Runs()[leadChat]["extra"].(map[string]any)["metadata"].(map[string]any)
		su, _ := md["subagent_usage"].(map[string]any)
		return su["usage"]
	}
	require.Eventually(t, func() bool { return fake.RunCount() == len(spans) && merged() != nil }, 15*time.Second, 20*time.Millisecond)
	time.Sleep(2500 * time.Millisecond) // past settle_time: a later correction would have landed
	assert.Equal(t, map[string]any{"input_tokens": 500.0, "output_tokens": 80.0, "total_tokens": 580.0,
		"input_token_details": map[string]any{"cache_read": 100.0}}, merged(), "merged by the collector, patched onto the run")
	assert.Positive(t, fake.Patches(leadChat), "the correction went as a PATCH")
	assert.Empty(t, fake.Violations())
	assert.Zero(t, fake.PendingPatches())
	for _, r := range fake.Requests() {
		assert.NotEqual(t, http.StatusConflict, r.Status, "a run was posted twice")
	}
	assert.NotContains(t, c.Logs(), langSmithTestKey)
}
