package langfuse

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// onStorage starts the exporter with the default sending queue on storage extension id,
// under the same component id each time (its files are named by it), as a restarted
// collector does.
// tune, when given, changes the config first.
func onStorage(t *testing.T, srv *langfusefake.Server, id component.ID, ext component.Component, tune ...func(*Config)) exporter.Traces {
	t.Helper()
	cfg := testConfig(srv)
	q := vendorhttp.DefaultQueueConfig()
	q.StorageID = &id
	cfg.QueueConfig = configoptional.Some(q)
	for _, f := range tune {
		f(cfg)
	}
	set := exportertest.NewNopSettings(componentType)
	set.ID = component.NewID(componentType)
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), extHost{id: ext}))
	return exp
}

// waitRows waits until Langfuse holds a row of every span id in ids.
func waitRows(t *testing.T, srv *langfusefake.Server, ids ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		rows := langfusefake.ByID(srv.Rows())
		for _, id := range ids {
			if _, ok := rows[id]; !ok {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond)
}

// waitInput waits until Langfuse's row of span id carries n merged subagent input tokens.
func waitInput(t *testing.T, srv *langfusefake.Server, id string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return langfusefake.ByID(srv.Rows())[id].Metadata["subagent_input_tokens"] == n
	}, 30*time.Second, 10*time.Millisecond)
}

// staleRevision1Stays sends, with td's spans, a revision 1 of chat older than the
// revision 2 Langfuse has (revision2Stays).
func staleRevision1Stays(t *testing.T, srv *langfusefake.Server, exp exporter.Traces, td ptrace.Traces, chat pcommon.SpanID) {
	t.Helper()
	stale := fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})
	copied := ptrace.NewTraces()
	td.CopyTo(copied)
	copied.ResourceSpans().MoveAndAppendTo(stale.ResourceSpans())
	revision2Stays(t, srv, exp, stale, chat.String())
}

// revision2Stays sends stale (nothing, when empty) with a trace of its own through exp,
// in one batch, waits until that trace is at Langfuse (so the batch was pushed, or what
// a queue held before it), and checks that chat's row is still its revision 2 and that
// Langfuse never received its revision 1.
func revision2Stays(t *testing.T, srv *langfusefake.Server, exp exporter.Traces, stale ptrace.Traces, chat string) {
	t.Helper()
	other, _, otherIDs := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	batch := ptrace.NewTraces()
	stale.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	other.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch))
	waitRows(t, srv, otherIDs[langfusefake.RoleLeadChat1].String())
	got := langfusefake.ByID(srv.Rows())[chat]
	assert.EqualValues(t, 9000, got.Metadata["subagent_input_tokens"], "revision 2 stays the row")
	assert.EqualValues(t, 2, got.Attributes[genai.AttrMergeRevision])
	// the row alone would pass if revision 1 went out and revision 2 was sent again after
	// it (the storage copied before its queue heard Langfuse's answer): check every event
	for _, o := range srv.Observations() {
		if o.ID == chat {
			assert.NotEqualValues(t, 1, o.Attributes[genai.AttrMergeRevision], "revision 1 was ingested")
		}
	}
	assert.Empty(t, srv.Problems())
}

// Revision 2 of a dispatcher reached Langfuse, then the collector restarted; revision 1
// and a late copy of the first emission (a retry the merge's sender made across the
// restart, or versions that were still queued) reach the restarted exporter. Langfuse
// keeps the last event it receives, so neither may be sent: the revisions let out are on
// the queue's storage, and the row stays revision 2.
func TestRevisionsLetOutSurviveARestart(t *testing.T) {
	srv := langfusefake.New(t)
	id, ext := fileStorage(t, t.TempDir(), 64<<20)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]

	exp := onStorage(t, srv, id, ext)
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9000, Output: 900})))
	waitInput(t, srv, chat.String(), 9000)
	require.NoError(t, exp.Shutdown(ctx))

	exp = onStorage(t, srv, id, ext)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	staleRevision1Stays(t, srv, exp, td, chat)
}

// The case the record is for: revision 1 failed and waits in the persistent queue for its
// retry while another consumer delivers revision 2, and the collector is killed before
// the retry. The storage as the kill left it (copied while the exporter waits) starts a
// new exporter, whose queue hands revision 1 out again first: it is not sent.
func TestQueuedOlderRevisionIsNotSentAfterAKill(t *testing.T) {
	srv := langfusefake.New(t)
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]

	exp := onStorage(t, srv, id, ext, func(c *Config) {
		// the retry never comes; the shipped config retries until the vendor takes it
		c.RetryConfig.InitialInterval, c.RetryConfig.MaxInterval, c.RetryConfig.MaxElapsedTime = time.Hour, time.Hour, 0
		c.QueueConfig.Get().NumConsumers = 2
	})
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	waitRows(t, srv, chat.String())
	srv.Script(langfusefake.Response{Status: 503, Body: `{"message":"busy"}`})
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})))
	require.Eventually(t, func() bool { return len(srv.Requests()) == 2 }, 30*time.Second, 10*time.Millisecond, "revision 1 was refused")
	require.NoError(t, exp.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9000, Output: 900})))
	waitInput(t, srv, chat.String(), 9000)
	killed := t.TempDir()
	require.NoError(t, os.CopyFS(killed, os.DirFS(dir)))

	// one consumer: the queue hands out revision 1 before the batch sent after it starts
	id2, ext2 := fileStorage(t, killed, 64<<20)
	again := onStorage(t, srv, id2, ext2, func(c *Config) { c.QueueConfig.Get().NumConsumers = 1 })
	defer func() { require.NoError(t, again.Shutdown(ctx)) }()
	revision2Stays(t, srv, again, ptrace.NewTraces(), chat.String())
}

// A run's trace values (name, tags, user, session: from its root and its spans) are on
// disk once the collector acknowledged its spans. Killed right then (the storage copied
// as it is) and restarted, the exporter shapes a re-emission of the run's dispatcher with
// them, so the row Langfuse replaces keeps them.
func TestTraceValuesSurviveAKill(t *testing.T) {
	srv := langfusefake.New(t)
	dir := t.TempDir()
	id, ext := fileStorage(t, dir, 64<<20)
	ctx := context.Background()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	chat := ids[langfusefake.RoleLeadChat1]

	exp := onStorage(t, srv, id, ext)
	defer func() { require.NoError(t, exp.Shutdown(ctx)) }()
	require.NoError(t, exp.ConsumeTraces(ctx, td))
	killed := t.TempDir()
	require.NoError(t, os.CopyFS(killed, os.DirFS(dir)))
	waitRows(t, srv, chat.String())
	first := langfusefake.ByID(srv.Rows())[chat.String()]
	require.NotEmpty(t, first.TraceName)
	require.NotEmpty(t, first.Tags)

	id2, ext2 := fileStorage(t, killed, 64<<20)
	again := onStorage(t, srv, id2, ext2)
	defer func() { require.NoError(t, again.Shutdown(ctx)) }()
	require.NoError(t, again.ConsumeTraces(ctx, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})))
	waitInput(t, srv, chat.String(), 7000)

	got := langfusefake.ByID(srv.Rows())[chat.String()]
	assert.Equal(t, first.TraceName, got.TraceName, "trace-level values survive the kill")
	assert.Equal(t, first.Tags, got.Tags)
	assert.Equal(t, first.UserID, got.UserID)
	assert.Equal(t, first.SessionID, got.SessionID)
	assert.Empty(t, srv.Problems())
}

// noListing is a storage extension whose clients cannot list their entries.
type noListing struct{ storage.Extension }

func (e noListing) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := e.Extension.GetClient(ctx, kind, id, name)
	return struct{ storage.Client }{c}, err
}

// A persistent queue on a storage extension that cannot list its entries works as
// before: what the exporter remembers is then in memory only.
func TestStorageThatCannotListStillQueues(t *testing.T) {
	srv := langfusefake.New(t)
	id, ext := fileStorage(t, t.TempDir(), 64<<20)
	exp := onStorage(t, srv, id, noListing{ext.(storage.Extension)})
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()
	td, _, ids := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	waitRows(t, srv, ids[langfusefake.RoleLeadChat1].String())
}
