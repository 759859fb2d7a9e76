//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// waitRow waits until Langfuse's row of span id satisfies ok.
func waitRow(t *testing.T, srv *langfusefake.Server, id string, ok func(langfusefake.Observation) bool) langfusefake.Observation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, there := langfusefake.ByID(srv.Rows())[id]
		if there && ok(row) {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("row %s never came as expected: %+v, problems %v", id, row.Metadata, srv.Problems())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func subagentInput(n int64) func(langfusefake.Observation) bool {
	return func(o langfusefake.Observation) bool { return o.Metadata["subagent_input_tokens"] == n }
}

// Through the ocb-built collector with a persistent queue on file_storage, killed with
// SIGKILL after a run's dispatcher was re-emitted as revision 2: after the restart a
// stale revision 1 (a sender's retry across the kill) is not sent over it, and a later
// revision 3, sent alone as the merge re-emits it after a restart, still carries the
// trace's name, tags, user and session, which came with the run's other spans before
// the kill. What the exporter remembers of both is on the queue's storage.
func TestLangfuseRemembersAcrossAKill(t *testing.T) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	dir := t.TempDir()
	otlpAddr := FreeAddr(t)
	cfg := LangfuseCollectorConfig(otlpAddr,
		langfuseExporterYAML(srv, "    sending_queue: {storage: file_storage}\n"),
		fmt.Sprintf("  file_storage:\n    directory: %q\n", dir), "file_storage")
	first := StartIn(t, dir, cfg, otlpAddr)

	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1].String()
	ctx := context.Background()
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, td))
	original := waitRow(t, srv, chat, func(o langfusefake.Observation) bool { return o.TraceName != "" })
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, ids[langfusefake.RoleLeadChat1], 2, genai.Usage{Input: 9000, Output: 900})))
	waitRow(t, srv, chat, subagentInput(9000))
	first.Kill()

	StartIn(t, dir, cfg, otlpAddr)
	stale := fakevendor.Reemission(td, ids[langfusefake.RoleLeadChat1], 1, genai.Usage{Input: 7000, Output: 700})
	other, _, otherIDs := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	batch := ptrace.NewTraces()
	stale.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	other.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, batch))
	waitRow(t, srv, otherIDs[langfusefake.RoleLeadChat1].String(), func(langfusefake.Observation) bool { return true })
	assert.EqualValues(t, 9000, langfusefake.ByID(srv.Rows())[chat].Metadata["subagent_input_tokens"],
		"revision 1 was not sent over revision 2 after the kill")

	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, ids[langfusefake.RoleLeadChat1], 3, genai.Usage{Input: 11000, Output: 1100})))
	row := waitRow(t, srv, chat, subagentInput(11000))
	assert.Equal(t, original.TraceName, row.TraceName, "trace-level values survive the kill")
	assert.Equal(t, original.Tags, row.Tags)
	assert.Equal(t, original.UserID, row.UserID)
	assert.Equal(t, original.SessionID, row.SessionID)
	assert.Empty(t, srv.Problems())
}

// The same for LangSmith, which applies a run's patches in the order it receives them:
// after a SIGKILL that followed revision 2's patch, a stale revision 1 sent again is not
// patched over it (the batch it came in is at LangSmith, so it was pushed).
func TestLangSmithRemembersRevisionsAcrossAKill(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	dir := t.TempDir()
	otlpAddr := FreeAddr(t)
	cfg := langSmithQueueConfig(otlpAddr, fake.URL, dir)
	first := StartIn(t, dir, cfg, otlpAddr)

	td, ids := fakevendor.AgentTrace(7, time.Now().Add(-time.Minute))
	run := dottedorder.SpanUUID(ids.LeadChat)
	ctx := context.Background()
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, td))
	require.Eventually(t, func() bool { return fake.Runs()[run] != nil }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 900, Output: 99})))
	require.Eventually(t, func() bool { return fake.Patches(run) == 1 }, 30*time.Second, 20*time.Millisecond)
	first.Kill()

	StartIn(t, dir, cfg, otlpAddr)
	other, otherIDs := fakevendor.AgentTrace(8, time.Now().Add(-time.Minute))
	batch := fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 700, Output: 90})
	other.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, batch))
	require.Eventually(t, func() bool { return fake.Runs()[dottedorder.SpanUUID(otherIDs.LeadChat)] != nil },
		30*time.Second, 20*time.Millisecond)
	// revision 2 itself may be patched again (its push was answered but not yet taken
	// off the queue when the process was killed): the same revision again is harmless
	md := fake.Runs()[run]["extra"].(map[string]any)["metadata"].(map[string]any)
	assert.EqualValues(t, 2, md[genai.AttrMergeRevision], "revision 1 was not patched over revision 2 after the kill")
	assert.Empty(t, fake.Violations())
}
