package agentusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// The deletions the disk owes (heldDisk): tried again until it takes them, owed only
// for what is stored, never run over a copy written since. (Found by review.)

// fillingNext refuses the first batch after arm, and the disk fills while the pipeline
// has it (st.Fail): the undo that follows the refusal cannot write.
type fillingNext struct {
	next consumer.Traces
	st   *storagetest.Storage
	arm  atomic.Bool
}

func (f *fillingNext) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *fillingNext) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if f.arm.CompareAndSwap(true, false) {
		f.st.Fail(errDiskFull)
		return errors.New("refused")
	}
	return f.next.ConsumeTraces(ctx, td)
}

// heldAndFinished is a batch holding heldRunID and finishing another run: it has a span,
// so the pipeline is asked (a request that only holds sends nothing).
func heldAndFinished() []byte {
	return []byte(`{"post":[` + lsRun(heldRunID, "", "llm", false) + `,` + lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3b9", "", "llm", true) + `]}`)
}

// A request the pipeline refuses wrote its new held run; the undo's deletion of it is
// refused by the disk. It is not held, and the deletion is not owed: flushes on a
// healthy disk never delete it, and the next start sends a run whose only request was
// answered 503.
func TestRefusedUndoDeletionIsTriedAgain(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	f := &fillingNext{next: sink1, st: st}
	url1, r1 := startStored(t, st, f)
	f.arm.Store(true)
	code, _, _ := do(t, http.MethodPost, url1+"/runs/batch", "application/json", heldAndFinished(), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.Zero(t, r1.runs.Pending(), "nothing held: the request was refused")
	require.Equal(t, 1, st.Count(prefixRun), "the undo's deletion was refused")
	st.Fail(nil)
	assert.Eventually(t, func() bool { return st.Count(prefixRun) == 0 }, 3*time.Second, 20*time.Millisecond,
		"a refused deletion is tried again at every flush")
	kill(t, r1)

	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Zero(t, ofRun(heldRunID, sink1, sink2), "the SDK was answered 503 and never sent it again")
}

// The same with a deletion already owed: the run went on at its timeout while the disk
// refused its deletion; a POST of the same id writes it (write drops the owed deletion),
// the pipeline refuses that request and the disk refuses the undo's deletion. After the
// disk heals, flushes never delete it and the next start sends the run a second time.
func TestOwedDeletionSurvivesARewriteAndARefusedUndo(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	f := &fillingNext{next: sink1, st: st}
	url1, r1 := startStored(t, st, f, func(c *Config) { c.PendingTimeout = 150 * time.Millisecond })
	postHeldRun(t, url1)
	st.Fail(errDiskFull)
	require.Eventually(t, func() bool { return chatsIn(sink1) == 1 }, 5*time.Second, 10*time.Millisecond, "went on at its timeout")
	require.Equal(t, 1, st.Count(prefixRun), "its deletion is owed")

	st.Fail(nil)
	f.arm.Store(true)
	code, _, _ := do(t, http.MethodPost, url1+"/runs/batch", "application/json", heldAndFinished(), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	st.Fail(nil)
	assert.Eventually(t, func() bool { return st.Count(prefixRun) == 0 }, 3*time.Second, 20*time.Millisecond,
		"deleted at a flush")
	kill(t, r1)

	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2, func(c *Config) { c.PendingTimeout = 150 * time.Millisecond })
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Equal(t, 1, chatsIn(sink1, sink2), "once")
}

// countingClient counts the delete operations the receiver asks the disk for.
type countingClient struct {
	storageclient.WalkClient
	deletes atomic.Int64
}

func (c *countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if op.Type == storage.Delete {
			c.deletes.Add(1)
		}
	}
	return c.WalkClient.Batch(ctx, ops...)
}

// While the disk refuses writes, requests that only finish runs (POST with end_time,
// the SDKs' common case) go on, 202. None of those runs was ever stored, yet each
// request makes their deletions owed and tries every owed deletion again: the owed set
// grows with every run that passes and each request's delete batch with it.
func TestNoDeletionOwedForRunsNeverStored(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	url, r := startStored(t, st, sink)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	cc := &countingClient{WalkClient: r.store.client}
	r.store.client = cc
	st.Fail(errDiskFull)
	const n = 200
	for i := range n {
		id := fmt.Sprintf("01a22a31-cdeb-7000-8000-%012x", i)
		code, _, resp := do(t, http.MethodPost, url+"/runs", "application/json", []byte(lsRun(id, "", "llm", true)), nil)
		require.Equal(t, http.StatusAccepted, code, resp)
	}
	assert.Equal(t, n, chatsIn(sink))
	assert.Zero(t, st.Count(prefixRun), "nothing was ever stored")
	r.runsMu.Lock()
	owed := len(r.runDisk.undeleted)
	r.runsMu.Unlock()
	assert.Zero(t, owed, "no deletion is owed for a run never stored")
	assert.Zero(t, cc.deletes.Load(), "nor asked of the disk")
}

func runOf(id, parent, runType, name string, ended bool) string {
	m := map[string]any{
		"id": id, "trace_id": "01a22a31-cdc6-7000-8000-016bd484a2ba", "name": name, "run_type": runType,
		"start_time": "2026-01-02T03:04:05.000001Z",
		"extra":      map[string]any{"metadata": map[string]any{"thread_id": "th1"}},
	}
	if runType == "tool" {
		m["extra"].(map[string]any)["tool_call_id"] = "call_1"
	}
	if parent != "" {
		m["parent_run_id"] = parent
	}
	if ended {
		m["end_time"] = 1767323046000
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// A batch holds more new runs than max_pending: the overflow goes on at once (Plan moves
// it from Park to Evict). A finished run of the same batch under it is still placed
// under it: a subagent's run under a task tool run is an agent run whether or not
// the tool run had room to be held.
func TestOverflowedParentStillPlacesItsChildren(t *testing.T) {
	const (
		task  = "01a22a31-cdeb-7000-8000-037a8c6bd3d1"
		other = "01a22a31-cdeb-7000-8000-037a8c6bd3d2"
		sub   = "01a22a31-cdeb-7000-8000-037a8c6bd3d3"
	)
	body := []byte(`{"post":[` + runOf(task, "", "tool", "task", false) + `,` +
		runOf(other, "", "chain", "other", false) + `,` +
		runOf(sub, task, "chain", "researcher", true) + `]}`)
	for _, maxPending := range []int{2, 1} {
		sink := new(consumertest.TracesSink)
		url, _ := startReceiver(t, sink, func(c *Config) { c.MaxPending = maxPending })
		code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", body, nil)
		require.Equal(t, http.StatusAccepted, code, resp)
		assert.Len(t, spansNamed(sink, "invoke_agent researcher"), 1, "max_pending=%d: the subagent's run under the task tool run", maxPending)
	}
}

// deleteFailing refuses every batch that deletes while fail is set (writes go through).
type deleteFailing struct {
	storageclient.WalkClient
	fail atomic.Bool
}

func (c *deleteFailing) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		if op.Type == storage.Delete && c.fail.Load() {
			return errDiskFull
		}
	}
	return c.WalkClient.Batch(ctx, ops...)
}

// A run went on while the disk refused its deletion; the same id is then held again
// (written). The owed deletion must not delete the new stored copy at the next flush:
// a kill -9 after it still holds the run.
func TestRewrittenKeyIsNotDeletedByAnOwedDeletion(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	dc := &deleteFailing{WalkClient: r1.store.client}
	r1.store.client = dc
	postHeldRun(t, url1)
	dc.fail.Store(true)
	code, _, _ := do(t, http.MethodPatch, url1+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code)
	postHeldRun(t, url1) // held again, written
	dc.fail.Store(false)
	time.Sleep(1200 * time.Millisecond) // flushes (every 500 ms with the defaults)
	assert.Equal(t, 1, st.Count(prefixRun), "the run held now stays stored")
	kill(t, r1)

	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	assert.Equal(t, 1, r2.runs.Pending(), "the restart holds it")
}

// atomicGate refuses while refuse is set (read by the flush loop too).
type atomicGate struct {
	next    consumer.Traces
	refuse  atomic.Bool
	refused atomic.Int32 // the sends it refused
}

func (g *atomicGate) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (g *atomicGate) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if g.refuse.Load() {
		g.refused.Add(1)
		return errors.New("refused")
	}
	return g.next.ConsumeTraces(ctx, td)
}

// A timed-out run the pipeline refuses is held again, still stored: its PATCH then
// completes it into one span with its usage. The receiver's clock stands still once the
// run timed out, so the run cannot time out again before its PATCH comes.
func TestRefusedTimeoutIsHeldAgain(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	g := &atomicGate{next: sink}
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	url, r := startStoredAt(t, st, g, now, func(c *Config) { c.PendingTimeout = 150 * time.Millisecond })
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	g.refuse.Store(true)
	postHeldRun(t, url)
	clock.Add(int64(time.Second)) // past pending_timeout: the next flush sends it, refused
	require.Eventually(t, func() bool { return g.refused.Load() > 0 }, 10*time.Second, 5*time.Millisecond)
	r.runsMu.Lock() // the flush holds it while it sends and holds the run again
	held := r.runs.Pending()
	r.runsMu.Unlock()
	assert.Equal(t, 1, held, "held again")
	assert.Equal(t, 1, st.Count(prefixRun))
	g.refuse.Store(false)
	code, _, _ := do(t, http.MethodPatch, url+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code)
	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1, "one span: the run completed by its PATCH")
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u, "the PATCH found the held run")
}
