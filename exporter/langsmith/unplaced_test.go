package langsmith

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
