package langsmith

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/filestoragetest"
)

// queuedOn is the default sending queue on storage extension id, with consumers
// consumers, retrying until LangSmith takes the batch (the shipped config) but only after
// retryAfter.
func queuedOn(id component.ID, consumers int, retryAfter time.Duration) func(*Config) {
	return func(c *Config) {
		q := vendorhttp.DefaultQueueConfig()
		q.StorageID = &id
		q.NumConsumers = consumers
		c.QueueConfig = configoptional.Some(q)
		c.RetryConfig.InitialInterval, c.RetryConfig.MaxInterval, c.RetryConfig.MaxElapsedTime = retryAfter, retryAfter, 0
	}
}

// Revision 1's patch failed and waits in the persistent queue for its retry while another
// consumer patches revision 2 onto the run; the collector is killed before the retry.
// The storage as the kill left it (copied while the exporter waits) starts a new
// exporter, whose queue hands revision 1 out again first: LangSmith applies patches in
// the order it receives them, so it must not be sent.
func TestQueuedOlderPatchIsNotSentAfterAKill(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	id, host := filestoragetest.Start(t, dir, 0)
	self := component.NewID(componentType)
	ctx := context.Background()
	td, ids := fakevendor.AgentTrace(3, base)
	run := dottedorder.SpanUUID(ids.LeadChat)

	h := mustStartOn(t, fake, host, self, queuedOn(id, 2, time.Hour))
	require.NoError(t, h.exp.ConsumeTraces(ctx, td))
	require.Eventually(t, func() bool { return fake.Runs()[run] != nil }, 30*time.Second, 10*time.Millisecond)
	fake.Script(fakevendor.LangSmithResponse{Status: http.StatusServiceUnavailable})
	require.NoError(t, h.exp.ConsumeTraces(ctx, fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 700, Output: 90})))
	require.Eventually(t, func() bool { return len(fake.Requests()) == 2 }, 30*time.Second, 10*time.Millisecond, "revision 1 was refused")
	require.NoError(t, h.exp.ConsumeTraces(ctx, fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 900, Output: 99})))
	require.Eventually(t, func() bool { return fake.Patches(run) == 1 }, 30*time.Second, 10*time.Millisecond)
	killed := t.TempDir()
	require.NoError(t, os.CopyFS(killed, os.DirFS(dir)))

	// one consumer: the queue hands out revision 1 before the batch sent after it starts
	id2, host2 := filestoragetest.Start(t, killed, 0)
	again := mustStartOn(t, fake, host2, self, queuedOn(id2, 1, 10*time.Millisecond))
	other, otherIDs := fakevendor.AgentTrace(4, base)
	require.NoError(t, again.exp.ConsumeTraces(ctx, other))
	require.Eventually(t, func() bool { return fake.Runs()[dottedorder.SpanUUID(otherIDs.LeadChat)] != nil },
		30*time.Second, 10*time.Millisecond)

	assert.EqualValues(t, 900, subagentInput(t, fake.Runs()[run]), "revision 2 stays the run")
	// The copy can be taken after LangSmith took revision 2 but before its queue heard the
	// answer, as a kill can: the restarted queue sends revision 2 again (at least once),
	// which is harmless. Revision 1 must never be sent.
	patches := fake.PatchesOf(run)
	require.NotEmpty(t, patches)
	for i, p := range patches {
		assert.EqualValues(t, 900, subagentInput(t, p), "patch %d of %d: revision 1 was patched over revision 2", i+1, len(patches))
	}
	assert.Empty(t, fake.Violations())
	noConflicts(t, fake)
}
