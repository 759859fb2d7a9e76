//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// the gather branch would keep them until the root comes (or wait_duration, 5 minutes)
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
	assert.Equal(t, want, merged(leadChat), "merged as the spans came, patched onto the run")
	assert.Equal(t, want, merged(uLeadChat), "merged before the gathered trace went, or patched onto it")
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

// A DeerFlow-shaped run traced by the LangSmith JS SDK and pointed at the agentusage
// receiver (LANGSMITH_ENDPOINT) reaches LangSmith through the shipped sidecar as it
// goes: each run is there once its PATCH came, while the lead run is still open, under
// the id the SDK gave it, in the project it named, in the tree the fake checks. The
// dispatching model call went out before its subagents ran; their usage reaches its run
// by PATCH.
func TestShippedSidecarStreamsLangSmithSDKRunsFromAgentUsage(t *testing.T) {
	ports, fake, _ := startShippedToLangSmith(t, "e2e-agentusage")
	release := filepath.Join(t.TempDir(), "release")
	type sdkRun struct {
		TraceID string `json:"trace_id"`
		RootID  string `json:"root_id"`
	}
	sdkProject.ensure(t) // npm ci, if it must run, before the clock below starts
	var out string
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, _, runErr = sdkProject.exec(60*time.Second, "langsmith-deerflow-run.mjs", "LANGSMITH_ENDPOINT=http://"+ports.AgentUsage,
			"LANGSMITH_API_KEY=test-key", "HOLD_ROOT_FILE="+release)
	}()
	t.Cleanup(func() { // a test that failed early lets the script end before the collector stops
		_ = os.WriteFile(release, nil, 0o600)
		<-done
	})
	require.Eventually(t, func() bool { return fake.RunCount() == 8 }, 20*time.Second, 20*time.Millisecond,
		"every run but the lead's at LangSmith while the lead run is open")
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	var run sdkRun
	select {
	case <-done:
		require.NoError(t, runErr)
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &run), out)
	case <-time.After(70 * time.Second):
		t.Fatal("the SDK script did not finish")
	}
	var dispatch string
	require.Eventually(t, func() bool {
		runs := fake.Runs()
		for id, r := range runs {
			md, _ := r["extra"].(map[string]any)["metadata"].(map[string]any)
			if su, ok := md["subagent_usage"].(map[string]any); ok && su["usage"] != nil {
				dispatch = id
			}
		}
		_, root := runs[run.RootID]
		return len(runs) == 9 && root && dispatch != ""
	}, 20*time.Second, 20*time.Millisecond, "the lead run, and the dispatcher's merged usage")
	for id, r := range fake.Runs() {
		assert.Equal(t, run.TraceID, r["trace_id"], "run %s (%v) under the SDK's trace id", id, r["name"])
		assert.Equal(t, "deer-flow", r["session_name"], "run %s in the SDK's project, not the sidecar's", id)
	}
	md := fake.Runs()[dispatch]["extra"].(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, map[string]any{"input_tokens": 500.0, "output_tokens": 100.0, "total_tokens": 600.0,
		"input_token_details": map[string]any{"cache_read": 50.0}, "output_token_details": map[string]any{"reasoning": 10.0}},
		md["subagent_usage"].(map[string]any)["usage"])
	assert.Positive(t, fake.Patches(dispatch), "the merged usage went as a PATCH")
	assert.Empty(t, fake.Violations())
	for _, req := range fake.Requests() {
		assert.NotEqual(t, 409, req.Status, "a run posted twice")
	}
}
