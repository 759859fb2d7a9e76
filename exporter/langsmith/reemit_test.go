package langsmith

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// subagentInput reads extra.metadata.subagent_usage.usage.input_tokens of a run.
func subagentInput(t *testing.T, run map[string]any) float64 {
	t.Helper()
	md := run["extra"].(map[string]any)["metadata"].(map[string]any)
	su, ok := md["subagent_usage"].(map[string]any)
	require.True(t, ok, "run has no subagent_usage: %v", md)
	return su["usage"].(map[string]any)["input_tokens"].(float64)
}

func noConflicts(t *testing.T, fake *fakevendor.LangSmith) {
	t.Helper()
	for _, r := range fake.Requests() {
		assert.NotEqual(t, http.StatusConflict, r.Status, "a run was posted twice: %+v", r)
	}
}

// A dispatcher sent, then re-emitted twice out of order: revision 2 is patched onto the
// run, revision 1 arriving after it is not sent, and nothing is posted twice. Through
// multipart and the batch endpoint.
func TestReemissionsPatchTheRunNewestWins(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "multipart", true: "batch"}[batch], func(t *testing.T) {
			fake := newFake(t)
			if batch {
				fake.DisableMultipart()
			}
			h := mustStart(t, fake, nil)
			ctx := context.Background()
			td, ids := fakevendor.AgentTrace(3, base)
			rev1 := fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 700, Output: 90})
			rev2 := fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 900, Output: 99})
			task2 := fakevendor.Reemission(td, ids.Task, 2, genai.Usage{Input: 900, Output: 99})
			require.NoError(t, h.exp.ConsumeTraces(ctx, td))
			require.NoError(t, h.exp.ConsumeTraces(ctx, rev2))
			require.NoError(t, h.exp.ConsumeTraces(ctx, task2))
			require.NoError(t, h.exp.ConsumeTraces(ctx, rev1))

			run := fake.Runs()[dottedorder.SpanUUID(ids.LeadChat)]
			assert.EqualValues(t, 900, subagentInput(t, run), "revision 2 wins")
			md := run["extra"].(map[string]any)["metadata"].(map[string]any)
			assert.Equal(t, genai.MergeCorrected, md[genai.AttrMergeStatus])
			assert.EqualValues(t, 2, md[genai.AttrMergeRevision])
			// the patch is the whole run again: own usage and cost stay
			assert.EqualValues(t, 1200, run["outputs"].(map[string]any)["usage_metadata"].(map[string]any)["input_tokens"])
			assert.Equal(t, 1, fake.Patches(dottedorder.SpanUUID(ids.LeadChat)), "revision 1 was never sent")
			taskRun := fake.Runs()[dottedorder.SpanUUID(ids.Task)]
			assert.EqualValues(t, 900, subagentInput(t, taskRun), "a re-emitted tool call is patched too")
			assert.Equal(t, genai.MergeMerged, taskRun["extra"].(map[string]any)["metadata"].(map[string]any)[genai.AttrMergeStatus])
			assert.Equal(t, 8, fake.RunCount())
			assert.Empty(t, fake.Violations())
			noConflicts(t, fake)
		})
	}
}

// A re-emission that reaches the exporter before the first emission (another queue
// consumer took the first), its trace unknown here, goes out as an update LangSmith
// places itself (PATCH /runs/{id}, no trace_id or dotted_order: the exporter cannot tell
// it from a correction of a run posted before a restart); the service holds it until the
// post and the update wins. The first emission is still posted: it creates the run, at
// its place in its trace (nothing is learnt from the update's made-up place).
func TestReemissionBeforeTheFirstEmission(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	ctx := context.Background()
	td, ids := fakevendor.AgentTrace(4, base)
	require.NoError(t, h.exp.ConsumeTraces(ctx, fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 800, Output: 1})))
	assert.Equal(t, 1, fake.PendingPatches())
	require.NoError(t, h.exp.ConsumeTraces(ctx, td))
	assert.Zero(t, fake.PendingPatches())
	run := fake.Runs()[dottedorder.SpanUUID(ids.LeadChat)]
	assert.EqualValues(t, 800, subagentInput(t, run))
	assert.NotEqual(t, dottedorder.SpanUUID(ids.LeadChat), run["trace_id"], "posted in its trace, not re-rooted")
	assert.NotEmpty(t, run["parent_run_id"])
	assert.NotContains(t, run["extra"].(map[string]any)["metadata"], "orphan")
	assert.Equal(t, []string{"/runs/" + dottedorder.SpanUUID(ids.LeadChat)}, updatePaths(fake))
	assert.Equal(t, 8, fake.RunCount())
	assert.Empty(t, fake.Violations())
	noConflicts(t, fake)
}

// One batch holding the first emission and two re-emissions of a span (a queue batches
// them together): the post goes first, then only the newest patch.
func TestFirstEmissionAndReemissionsInOneBatch(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, ids := fakevendor.AgentTrace(5, base)
	all := ptrace.NewTraces()
	fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 950}).ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	first := ptrace.NewTraces()
	td.CopyTo(first)
	first.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 750}).ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), all))

	id := dottedorder.SpanUUID(ids.LeadChat)
	assert.EqualValues(t, 950, subagentInput(t, fake.Runs()[id]))
	assert.Equal(t, 1, fake.Patches(id))
	reqs := fake.Requests()
	require.Len(t, reqs, 2, "posts, then patches")
	assert.Len(t, reqs[0].RunIDs, 8)
	assert.Empty(t, reqs[0].PatchIDs)
	assert.Equal(t, []string{id}, reqs[1].PatchIDs)
	assert.Empty(t, fake.Violations())
	noConflicts(t, fake)
}

// A patch refused retryably is retried alone; the posts that went through are not sent
// again.
func TestPatchRetriedAlone(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, ids := fakevendor.AgentTrace(6, base)
	all := ptrace.NewTraces()
	td.CopyTo(all)
	fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 640}).ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	fake.Script(fakevendor.LangSmithResponse{Status: http.StatusAccepted}, fakevendor.LangSmithResponse{Status: http.StatusServiceUnavailable})
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), all))
	id := dottedorder.SpanUUID(ids.LeadChat)
	assert.EqualValues(t, 640, subagentInput(t, fake.Runs()[id]))
	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, []string{id}, reqs[2].PatchIDs)
	assert.Empty(t, reqs[2].RunIDs)
	noConflicts(t, fake)
}

// A batch holding the same first emission twice (a sender retried a request the
// collector had accepted) posts each run once: LangSmith refuses a request that posts a
// run id twice.
func TestDuplicateFirstEmissionsPostedOnce(t *testing.T) {
	fake := newFake(t)
	h := mustStart(t, fake, nil)
	td, _ := fakevendor.AgentTrace(8, base)
	twice := ptrace.NewTraces()
	td.CopyTo(twice)
	again := ptrace.NewTraces()
	td.CopyTo(again)
	again.ResourceSpans().MoveAndAppendTo(twice.ResourceSpans())
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), twice))
	assert.Equal(t, 8, fake.RunCount())
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	assert.Len(t, reqs[0].RunIDs, 8)
	assert.Empty(t, fake.Violations())
}

// updatePaths are the paths of the fake's PATCH /runs/{id} requests, in order.
func updatePaths(fake *fakevendor.LangSmith) []string {
	var out []string
	for _, r := range fake.Requests() {
		if strings.HasPrefix(r.Path, "/runs/") && r.Path != "/runs/multipart" && r.Path != "/runs/batch" {
			out = append(out, r.Path)
		}
	}
	return out
}
