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

// startShippedToLangSmith runs the shipped sidecar (otelcol-config.yaml) with only its
// LangSmith exporter on, towards a LangSmith fake, into project.
func startShippedToLangSmith(t *testing.T, project string) (sidecarPorts, *fakevendor.LangSmith, *Collector) {
	t.Helper()
	ports := setSidecarEnv(t)
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	t.Cleanup(fake.Close)
	t.Setenv("LANGSMITH_TRACING", "true")
	t.Setenv("LANGSMITH_API_KEY", langSmithTestKey)
	t.Setenv("LANGSMITH_ENDPOINT", fake.URL)
	t.Setenv("LANGSMITH_PROJECT", project)
	return ports, fake, StartWithArgs(t, t.TempDir(), ports.OTLPHTTP, "--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"))
}

// The shipped sidecar streams the runs of an emitter that places its spans (the agentmeter
// runtime) to LangSmith: each span sent the moment it ends, one request each, children
// before their parents, is a run at LangSmith before the root has even been sent, in the
// tree the fake checks. The dispatcher's merged usage, unknown when it went out, reaches
// its run by PATCH, never by a second POST. The same trace from an emitter that does not
// place its spans, sent alongside, goes to LangSmith once its root has come, whole; no
// run of either goes twice.
func TestShippedSidecarStreamsPlacedRunsToLangSmith(t *testing.T) {
	ports, fake, c := startShippedToLangSmith(t, "e2e-stream")

	placed, ids := fakevendor.AgentTrace(5, time.Now().Add(-time.Minute))
	StripMergedUsage(placed)
	dottedordertest.Place(placed)
	unplaced, uids := fakevendor.AgentTrace(6, time.Now().Add(-time.Minute))
	StripMergedUsage(unplaced)
	pspans, uspans := inEndOrder(t, placed), inEndOrder(t, unplaced)
	n := len(pspans)
	send := func(td ptrace.Traces, sp ptrace.Span) {
		one := ptrace.NewTraces()
		rs := one.ResourceSpans().AppendEmpty()
		td.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
		sp.CopyTo(rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty())
		require.NoError(t, SendOTLPHTTP(context.Background(), ports.OTLPHTTP, one))
	}
	for i := range n - 1 {
		send(placed, pspans[i])
		send(unplaced, uspans[i])
	}
	// the hold branch would keep them until the root comes (or wait_duration, 5 minutes)
	require.Eventually(t, func() bool { return fake.RunCount() == n-1 }, 15*time.Second, 20*time.Millisecond,
		"every placed run but the root at LangSmith before the root is sent")
	time.Sleep(time.Second)
	assert.Equal(t, n-1, fake.RunCount(), "the unplaced trace is held until its root comes")
	send(placed, pspans[n-1])
	send(unplaced, uspans[n-1])

	merged := func(chat string) any {
		md, _ := fake.Runs()[chat]["extra"].(map[string]any)["metadata"].(map[string]any)
		su, _ := md["subagent_usage"].(map[string]any)
		return su["usage"]
	}
	leadChat, uLeadChat := dottedorder.SpanUUID(ids.LeadChat), dottedorder.SpanUUID(uids.LeadChat)
	require.Eventually(t, func() bool { return fake.RunCount() == 2*n && merged(leadChat) != nil && merged(uLeadChat) != nil },
		15*time.Second, 20*time.Millisecond)
	time.Sleep(2500 * time.Millisecond) // past settle_time: a later correction would have landed
	want := map[string]any{"input_tokens": 500.0, "output_tokens": 80.0, "total_tokens": 580.0,
		"input_token_details": map[string]any{"cache_read": 100.0}}
	assert.Equal(t, want, merged(leadChat), "merged by the streamed branch, patched onto the run")
	assert.Equal(t, want, merged(uLeadChat), "merged by the hold branch before it went")
	assert.Positive(t, fake.Patches(leadChat), "the correction went as a PATCH")
	assert.Empty(t, fake.Violations())
	assert.Zero(t, fake.PendingPatches())
	for _, r := range fake.Requests() {
		assert.NotEqual(t, http.StatusConflict, r.Status, "a run was posted twice")
	}
	assert.NotContains(t, c.Logs(), langSmithTestKey)
}

// inEndOrder returns td's spans in the order they end; the root must end last.
func inEndOrder(t *testing.T, td ptrace.Traces) []ptrace.Span {
	t.Helper()
	var spans []ptrace.Span
	for sp := range spaniter.All(td) {
		spans = append(spans, sp)
	}
	slices.SortStableFunc(spans, func(a, b ptrace.Span) int { return int(a.EndTimestamp()) - int(b.EndTimestamp()) })
	require.True(t, spans[len(spans)-1].ParentSpanID().IsEmpty(), "the root ends last")
	return spans
}
