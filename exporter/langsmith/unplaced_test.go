package langsmith

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// A correction of a run posted where this exporter no longer knows its trace (after a
// restart, with the chain cache off, or once it forgot the trace) is sent as an update
// LangSmith places itself (PATCH /runs/{id}): the run keeps its place and gets the new
// figures; a patch with a made-up place would have moved it.
func TestCorrectionOfAnUnknownTraceKeepsTheRunsPlace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		mutate  func(*Config)
	}{
		{name: "after a restart", restart: true},
		{name: "chain cache off", mutate: func(c *Config) { c.MaxCachedSpans = 0 }},
		{name: "trace forgotten", mutate: func(c *Config) { c.MaxCachedSpans = 16 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			ctx := context.Background()
			td, ids := fakevendor.AgentTrace(41, base)
			h := mustStart(t, fake, tc.mutate)
			require.NoError(t, h.exp.ConsumeTraces(ctx, td))
			id := dottedorder.SpanUUID(ids.LeadChat)
			posted := fake.Runs()[id]
			place := []any{posted["trace_id"], posted["dotted_order"], posted["parent_run_id"]}
			if tc.restart {
				h = mustStart(t, fake, nil)
			}
			for s := byte(100); s < 104; s++ { // other runs go by meanwhile
				other, _ := fakevendor.AgentTrace(s, base)
				require.NoError(t, h.exp.ConsumeTraces(ctx, other))
			}
			require.NoError(t, h.exp.ConsumeTraces(ctx, fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 777})))
			run := fake.Runs()[id]
			assert.EqualValues(t, 777, subagentInput(t, run))
			assert.Equal(t, place, []any{run["trace_id"], run["dotted_order"], run["parent_run_id"]}, "the run stays where it was posted")
			assert.NotContains(t, run["extra"].(map[string]any)["metadata"], "orphan")
			assert.Equal(t, []string{"/runs/" + id}, updatePaths(fake))
			assert.Empty(t, fake.Violations())
		})
	}
}

// An update LangSmith places goes by itself: when its PATCH is answered 404 (its run not
// ingested yet), the retry sends that update alone, never again the posts and the placed
// patches pushed with it.
func TestUnplacedUpdateRetriedAlone(t *testing.T) {
	fake := newFake(t)
	ctx := context.Background()
	td, ids := fakevendor.AgentTrace(42, base)
	h := mustStart(t, fake, nil)
	require.NoError(t, h.exp.ConsumeTraces(ctx, td))
	h = mustStart(t, fake, nil) // a restart: the correction's trace is not known any more

	fresh, freshIDs := fakevendor.AgentTrace(43, base)
	batch := ptrace.NewTraces()
	fresh.CopyTo(batch)
	fakevendor.Reemission(fresh, freshIDs.LeadChat, 1, genai.Usage{Input: 444}).ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 555}).ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	before := len(fake.Requests())
	fake.Script(fakevendor.LangSmithResponse{Status: http.StatusAccepted}, fakevendor.LangSmithResponse{Status: http.StatusAccepted},
		fakevendor.LangSmithResponse{Status: http.StatusNotFound})
	require.NoError(t, h.exp.ConsumeTraces(ctx, batch))

	placed, unplaced := dottedorder.SpanUUID(freshIDs.LeadChat), dottedorder.SpanUUID(ids.LeadChat)
	assert.EqualValues(t, 444, subagentInput(t, fake.Runs()[placed]))
	assert.EqualValues(t, 555, subagentInput(t, fake.Runs()[unplaced]))
	var paths []string
	posted, patched := 0, 0
	for _, r := range fake.Requests()[before:] {
		paths = append(paths, r.Path)
		if r.Path == "/runs/multipart" {
			posted += len(r.RunIDs)
			patched += len(r.PatchIDs)
		}
	}
	assert.Equal(t, []string{"/runs/multipart", "/runs/multipart", "/runs/" + unplaced, "/runs/" + unplaced}, paths)
	assert.Equal(t, fresh.SpanCount(), posted, "each new run posted once")
	assert.Equal(t, 1, patched, "the placed patch sent once, in multipart")
	assert.Empty(t, fake.Violations())
	noConflicts(t, fake)
}

// After a restart, the corrections of traces the exporter no longer knows are as many
// updates LangSmith places (PATCH /runs/{id}, on its lower rate limit), sent one after
// the other. When LangSmith throttles one (429), the rest are not sent into that limit:
// they fail with the throttle, and only the updates not delivered are retried. A 404
// (one run not ingested yet) does not stop the others.
func TestUnplacedUpdatesStopAtAThrottle(t *testing.T) {
	fake := newFake(t)
	ctx := context.Background()
	noRetry := func(c *Config) { c.RetryConfig.Enabled = false }
	h := mustStart(t, fake, noRetry)
	batch := ptrace.NewTraces()
	const traces = 6
	for no := range byte(traces) {
		td, ids := fakevendor.AgentTrace(60+no, base)
		require.NoError(t, h.exp.ConsumeTraces(ctx, td))
		fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 500}).ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	}
	h = mustStart(t, fake, noRetry) // a restart: the corrections' traces are unknown now
	before := len(fake.Requests())
	fake.Script(fakevendor.LangSmithResponse{Status: http.StatusAccepted}, fakevendor.LangSmithResponse{Status: http.StatusNotFound},
		fakevendor.LangSmithResponse{Status: http.StatusAccepted}, fakevendor.LangSmithResponse{Status: http.StatusTooManyRequests, RetryAfter: "30"})
	err := h.exp.ConsumeTraces(ctx, batch)
	require.Error(t, err)
	var statuses []int
	for _, r := range fake.Requests()[before:] {
		assert.True(t, strings.HasPrefix(r.Path, "/runs/") && r.Path != "/runs/multipart", r.Path)
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []int{http.StatusOK, http.StatusNotFound, http.StatusOK, http.StatusTooManyRequests}, statuses,
		"nothing sent after the throttle")
	var retry consumererror.Traces
	require.ErrorAs(t, err, &retry)
	assert.Equal(t, traces-2, retry.Data().SpanCount(), "the updates not delivered are retried, the two delivered are not")
}
