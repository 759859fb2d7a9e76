package langfuse

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/shape"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// A dispatcher sent with its trace, then re-emitted twice out of order, each alone: the
// row Langfuse keeps is revision 2 whole, with everything the first emission had (trace
// name, tags, user, usage and cost details), and revision 1 never replaces it.
func TestReemissionsReplaceTheRowNewestWins(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	first := langfusefake.ByID(srv.Rows())[chat.String()]
	require.NotEmpty(t, first.TraceName)

	rev1 := fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})
	rev2 := fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9000, Output: 900})
	require.NoError(t, exp.ConsumeTraces(ctx, rev2))
	require.NoError(t, exp.ConsumeTraces(ctx, rev1))
	// a duplicate of the first emission, late: it must not replace the re-emission either
	require.NoError(t, exp.ConsumeTraces(ctx, td))

	rows := srv.Rows()
	require.Len(t, rows, td.SpanCount(), "one row per span")
	got := langfusefake.ByID(rows)[chat.String()]
	assert.EqualValues(t, 9000, got.Metadata["subagent_input_tokens"])
	assert.EqualValues(t, 900, got.Metadata["subagent_output_tokens"])
	assert.Equal(t, genai.MergeCorrected, got.Metadata["merge_status"])
	assert.EqualValues(t, 2, got.Attributes[genai.AttrMergeRevision])
	assert.Equal(t, first.StartTime, got.StartTime)
	assert.Equal(t, first.TraceName, got.TraceName, "trace-level values survive a re-emission sent alone")
	assert.Equal(t, first.Tags, got.Tags)
	assert.Equal(t, first.UserID, got.UserID)
	assert.Equal(t, first.SessionID, got.SessionID)
	assert.Equal(t, first.Usage, got.Usage, "own usage is the first emission's")
	assert.Equal(t, first.Cost, got.Cost)
	assert.Equal(t, first.Type, got.Type)
	changed := map[string]bool{
		genai.AttrSubagentInput: true, genai.AttrSubagentOutput: true, genai.AttrSubagentTotal: true,
		shape.MetaSubagentInput: true, shape.MetaSubagentOutput: true, shape.MetaSubagentTotal: true,
	}
	for k, v := range first.Attributes {
		if !changed[k] {
			assert.Equal(t, v, got.Attributes[k], "attribute %s of the first emission is on the row", k)
		}
	}
	// the stale versions were never sent: the first batch, revision 2, then the late
	// duplicate without the re-emitted span
	assert.Equal(t, 2*td.SpanCount(), len(srv.Observations()))
	// Langfuse's trace total is own usage only, as before the re-emission
	assert.Equal(t, langfusefake.TraceUsage(srv.Observations()[:td.SpanCount()]), langfusefake.TraceUsage(rows))
	assert.Empty(t, srv.Problems())
}

// A batch holding the first emission and both re-emissions of a span sends only the
// newest; a batch of nothing but stale versions sends nothing.
func TestOnlyTheNewestVersionOfABatchGoesOut(t *testing.T) {
	srv := langfusefake.New(t)
	exp, _ := started(t, testConfig(srv))
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]
	all := ptrace.NewTraces()
	fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9}).ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	copied := ptrace.NewTraces()
	td.CopyTo(copied)
	copied.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 5}).ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	all.MarkReadOnly()
	require.NoError(t, exp.ConsumeTraces(ctx, all))
	rows := srv.Rows()
	require.Len(t, rows, td.SpanCount())
	assert.EqualValues(t, 9, langfusefake.ByID(rows)[chat.String()].Metadata["subagent_input_tokens"])
	assert.Len(t, srv.Observations(), td.SpanCount())

	reqs := len(srv.Requests())
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 1})))
	assert.Len(t, srv.Requests(), reqs, "nothing left to send")
}

// The shaper remembers a trace's values: a span in a later batch than its root (spans
// streamed as they end) gets the root's trace name.
func TestTraceNameReachesSpansOfLaterBatches(t *testing.T) {
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	s := shape.NewShaper(0)
	p := s.Plan(td)
	p.Release()
	late := fakevendor.Reemission(td, ids[langfusefake.RoleSubChat1], 1, genai.Usage{})
	shape.NewShaper(0).Plan(late).Apply(late)
	alone := langfusefake.Observe(late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
	late = fakevendor.Reemission(td, ids[langfusefake.RoleSubChat1], 1, genai.Usage{})
	s.Plan(late).Apply(late)
	remembered := langfusefake.Observe(late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0))
	assert.Empty(t, alone.TraceName, "without memory a lone span has no root to name its trace")
	assert.Equal(t, "lead-agent", remembered.TraceName)
	assert.Equal(t, 1, s.Traces())
}
