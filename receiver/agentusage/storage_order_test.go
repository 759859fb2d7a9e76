package agentusage

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/internal/storagetest"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
)

// These tests hold the receiver to "sent once" when its storage fails: a run or
// observation leaves the disk before it goes on, and a request whose storage fails is
// answered 503 before anything of it went on. Sent first and deleted after, a failed
// deletion sends it again: on the SDK's retry of the 503, after a kill -9, or at the
// next start after a Shutdown.

const (
	heldRunID = "01a22a31-cdeb-7000-8000-037a8c6bd3b1"
	runPatch  = `{"end_time":"2026-01-02T03:04:09Z","outputs":{"usage_metadata":{"input_tokens":7,"output_tokens":3}}}`
)

var errDiskFull = errors.New("disk full")

// chatsIn are the chat spans every sink got, in sink order.
func chatsIn(sinks ...*consumertest.TracesSink) int {
	n := 0
	for _, s := range sinks {
		n += len(spansNamed(s, "chat gpt-4o"))
	}
	return n
}

func postHeldRun(t *testing.T, url string) {
	t.Helper()
	code, _, resp := do(t, http.MethodPost, url+"/runs", "application/json", []byte(lsRun(heldRunID, "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
}

// The SDK's PATCH comes while the disk fails, then the collector is killed; after the
// restart the SDK sends the PATCH again. The run is one span with the PATCH's usage.
func TestFailingDiskPatchThenKillSendsTheRunOnce(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	postHeldRun(t, url1)

	st.Fail(errDiskFull)
	code, hdr, _ := do(t, http.MethodPatch, url1+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	assert.Zero(t, chatsIn(sink1), "nothing of a request answered 503 went on")
	kill(t, r1)
	st.Fail(nil)

	sink2 := new(consumertest.TracesSink)
	url2, r2 := startStored(t, st, sink2)
	code, _, _ = do(t, http.MethodPatch, url2+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code)
	require.NoError(t, r2.Shutdown(context.Background()))
	require.Equal(t, 1, chatsIn(sink1, sink2))
	u, _ := genai.UsageFromMap(spansNamed(sink2, "chat gpt-4o")[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u)
	assert.Zero(t, st.Count(prefixRun))
}

// A batch that finishes a held run, answered 503 because the disk refused the run's
// deletion, is sent again by the SDK: the run goes on once.
func TestFailingDiskBatchRetrySendsTheRunOnce(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	url, r := startStored(t, st, sink)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	postHeldRun(t, url)

	batch := `{"patch":[{"id":"` + heldRunID + `","trace_id":"01a22a31-cdc6-7000-8000-016bd484a2ba","end_time":"2026-01-02T03:04:09Z","outputs":{"usage_metadata":{"input_tokens":7,"output_tokens":3}}}]}`
	st.Fail(errDiskFull)
	code, _, _ := do(t, http.MethodPost, url+"/runs/batch", "application/json", []byte(batch), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.Zero(t, chatsIn(sink))
	assert.Equal(t, 1, r.runs.Pending(), "a refused request leaves the run held")

	st.Fail(nil)
	code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", []byte(batch), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 1, chatsIn(sink))
	assert.Zero(t, st.Count(prefixRun))
}

// Shutdown drains held runs; while the disk refuses their deletion they stay stored
// and go on at the next start, once.
func TestFailingDiskAtShutdownLeavesTheRunToTheNextStart(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	postHeldRun(t, url1)
	st.Fail(errDiskFull)
	require.NoError(t, r1.Shutdown(context.Background()))
	assert.Zero(t, chatsIn(sink1), "still stored, so not sent")
	st.Fail(nil)

	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Equal(t, 1, chatsIn(sink1, sink2))
	assert.Zero(t, st.Count(prefixRun))
}

// A run whose pending_timeout passes while the disk refuses its deletion is held for
// another pending_timeout, not sent; a kill -9 after it went on does not send it again.
func TestFailingDiskAtTimeoutHoldsTheRunAgain(t *testing.T) {
	st := storagetest.New()
	short := func(c *Config) { c.PendingTimeout = 100 * time.Millisecond }
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1, short)
	st.Fail(errDiskFull)
	code, _, _ := do(t, http.MethodPost, url1+"/runs", "application/json", []byte(lsRun(heldRunID, "", "llm", false)), nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "the first write fails too")
	st.Fail(nil)
	postHeldRun(t, url1)
	st.Fail(errDiskFull)
	time.Sleep(500 * time.Millisecond) // several flushes past the timeout
	assert.Zero(t, chatsIn(sink1), "not sent while it cannot leave the disk")
	assert.Equal(t, 1, r1.runs.Pending())

	st.Fail(nil)
	require.Eventually(t, func() bool { return chatsIn(sink1) == 1 }, 5*time.Second, 20*time.Millisecond)
	kill(t, r1)
	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2, short)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Equal(t, 1, chatsIn(sink1, sink2))
}

// A request the pipeline refuses leaves the disk as the receiver's memory is: the
// held run it would have finished is still stored, a run it would have held is not.
func TestRefusedRequestLeavesTheDiskAsItWas(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	gate := &switchable{next: sink1}
	url1, r1 := startStored(t, st, gate)
	postHeldRun(t, url1)

	gate.refuse = true
	code, _, _ := do(t, http.MethodPatch, url1+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	other := "01a22a31-cdeb-7000-8000-037a8c6bd3b2"
	code, _, _ = do(t, http.MethodPost, url1+"/runs/batch", "application/json",
		[]byte(`{"post":[`+lsRun(other, "", "llm", false)+`,`+lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3b3", "", "llm", true)+`]}`), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, 1, st.Count(prefixRun), "only the run held before the refusals")
	kept, err := st.Get(context.Background(), prefixRun+heldRunID)
	require.NoError(t, err)
	assert.NotNil(t, kept, "the held run the refused PATCH would have finished")
	kill(t, r1)

	sink2 := new(consumertest.TracesSink)
	url2, r2 := startStored(t, st, sink2)
	code, _, _ = do(t, http.MethodPatch, url2+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code)
	require.NoError(t, r2.Shutdown(context.Background()))
	chats := spansNamed(sink2, "chat gpt-4o")
	require.Len(t, chats, 1, "the refused POSTs are the SDK's to send again")
	assert.Equal(t, 0, chatsIn(sink1))
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u)
}

// The Langfuse ingestion face: an update answered 503 by a failing disk, then a kill,
// then the SDK's retry after the restart, make one generation; a refused update leaves
// the create and its trace root stored.
func TestLangfuseFailingDiskAndRefusalSendTheGenerationOnce(t *testing.T) {
	lines := strings.Split(lfBatch, "\n")
	createOnly := `{"batch":[` + lines[1] + strings.TrimSuffix(lines[2], ",") + `]}`
	update := `{"batch":[` + lines[3] + `]}`
	for _, tc := range []struct {
		name string
		fail func(st *storagetest.Storage, gate *switchable)
		want int
	}{
		{"failing disk", func(st *storagetest.Storage, _ *switchable) { st.Fail(errDiskFull) }, http.StatusServiceUnavailable},
		{"refusing pipeline", func(_ *storagetest.Storage, gate *switchable) { gate.refuse = true }, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storagetest.New()
			sink1 := new(consumertest.TracesSink)
			gate := &switchable{next: sink1}
			url1, r1 := startStored(t, st, gate)
			code, _, resp := do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(createOnly), nil)
			require.Equal(t, http.StatusMultiStatus, code, resp)
			tc.fail(st, gate)
			code, _, _ = do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(update), nil)
			require.Equal(t, tc.want, code)
			assert.Zero(t, chatsIn(sink1))
			assert.Equal(t, 2, st.Count(prefixObs), "the generation and its trace root stay stored")
			kill(t, r1)
			st.Fail(nil)

			sink2 := new(consumertest.TracesSink)
			url2, r2 := startStored(t, st, sink2)
			code, _, resp = do(t, http.MethodPost, url2+"/api/public/ingestion", "application/json", []byte(update), nil)
			require.Equal(t, http.StatusMultiStatus, code, resp)
			require.NoError(t, r2.Shutdown(context.Background()))
			require.Equal(t, 1, chatsIn(sink1, sink2))
			u, _ := genai.UsageFromMap(spansNamed(sink2, "chat gpt-4o")[0].Attributes())
			assert.Equal(t, genai.Usage{Input: 100, Output: 20, CacheRead: 30, Reasoning: 5}, u)
			assert.Zero(t, st.Count(prefixObs))
		})
	}
}

// Runs a full store pushes out while the disk refuses their deletion are held past
// max_pending, not sent: sent while still stored, the next start would send them
// again. Here the restart holds two stored runs with room for one, on a failing disk.
func TestFailingDiskEvictionHoldsTheRunPastTheBound(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1)
	postHeldRun(t, url1)
	second := "01a22a31-cdeb-7000-8000-037a8c6bd3b2"
	code, _, resp := do(t, http.MethodPost, url1+"/runs", "application/json", []byte(lsRun(second, "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	kill(t, r1)

	st.Fail(errDiskFull)
	oneRoom := func(c *Config) { c.MaxPending = 1 }
	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2, oneRoom)
	assert.Zero(t, sink2.SpanCount(), "the evicted run is still stored: not sent")
	assert.Equal(t, 2, r2.runs.Pending(), "held past max_pending")
	st.Fail(nil)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Equal(t, 2, chatsIn(sink2))
	assert.Zero(t, st.Count(prefixRun))

	sink3 := new(consumertest.TracesSink)
	_, r3 := startStored(t, st, sink3, oneRoom)
	require.NoError(t, r3.Shutdown(context.Background()))
	assert.Equal(t, 2, chatsIn(sink1, sink2, sink3), "each run once")
}

// hookedClient runs before, once, ahead of the first batch that match accepts.
type hookedClient struct {
	storageclient.WalkClient
	fired  atomic.Bool
	match  func(ops []*storage.Operation) bool
	before func()
}

func (c *hookedClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.match(ops) && c.fired.CompareAndSwap(false, true) {
		c.before()
	}
	return c.WalkClient.Batch(ctx, ops...)
}

// A full store pushes a held run out in the request that needs its room, and the run's
// PATCH can come while that request runs. The PATCH waits for the request (it was
// handled in between, deleting its stored copy after: a kill -9 lost it), and goes on
// after the evicted POST. (Found by review, test by a reviewer, adapted.)
func TestEvictedRunAndItsRacingPatchLoseNothing(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	url1, r1 := startStored(t, st, sink1, func(c *Config) { c.MaxPending = 1 })
	postHeldRun(t, url1)

	var patchCode atomic.Int64
	patched := make(chan struct{})
	r1.store.client = &hookedClient{
		WalkClient: r1.store.client,
		match: func(ops []*storage.Operation) bool {
			return slices.ContainsFunc(ops, func(op *storage.Operation) bool {
				return op.Type == storage.Delete && op.Key == prefixRun+heldRunID
			})
		},
		before: func() { // the SDK's PATCH comes while the run is pushed out
			go func() {
				defer close(patched)
				code, _, _ := do(t, http.MethodPatch, url1+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
				patchCode.Store(int64(code))
			}()
			select { // let it through, unless it waits for this request
			case <-patched:
			case <-time.After(300 * time.Millisecond):
			}
		},
	}
	other := "01a22a31-cdeb-7000-8000-037a8c6bd3b2"
	code, _, resp := do(t, http.MethodPost, url1+"/runs", "application/json", []byte(lsRun(other, "", "chain", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	<-patched
	require.Equal(t, int64(http.StatusAccepted), patchCode.Load())
	kill(t, r1)

	assert.Equal(t, 2, ofRun(heldRunID, sink1), "the evicted POST went on, then its PATCH")
	assert.Equal(t, 1, st.Count(prefixRun), "only the run held now")
	sink2 := new(consumertest.TracesSink)
	_, r2 := startStored(t, st, sink2)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Zero(t, ofRun(heldRunID, sink2), "nothing of it was left to send again")
	assert.Equal(t, 1, ofRun(other, sink2), "the run held at the kill")
	assert.Zero(t, st.Count(prefixRun))
}

// The pipeline refuses a request that pushes a held run out: the request is answered
// 503 and the run stays held, so its PATCH still finds it. (The run went on alone,
// stored on disk only, and its PATCH, taken for a run already sent, deleted it there.)
func TestRefusedEvictionKeepsTheRunHeld(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	gate := &switchable{next: sink}
	url, r := startStored(t, st, gate, func(c *Config) { c.MaxPending = 1 })
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	postHeldRun(t, url)

	gate.refuse = true
	other := "01a22a31-cdeb-7000-8000-037a8c6bd3b2"
	body := []byte(lsRun(other, "", "chain", false))
	code, _, _ := do(t, http.MethodPost, url+"/runs", "application/json", body, nil)
	require.Equal(t, http.StatusServiceUnavailable, code, "its eviction was refused with it")
	assert.Equal(t, 1, r.runs.Pending())
	assert.Equal(t, 1, st.Count(prefixRun))
	code, _, _ = do(t, http.MethodPatch, url+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusServiceUnavailable, code)

	gate.refuse = false
	code, _, _ = do(t, http.MethodPatch, url+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code)
	code, _, _ = do(t, http.MethodPost, url+"/runs", "application/json", body, nil)
	require.Equal(t, http.StatusAccepted, code)
	chats := spansNamed(sink, "chat gpt-4o")
	require.Len(t, chats, 1, "the POST and its PATCH, one span")
	u, _ := genai.UsageFromMap(chats[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 7, Output: 3}, u)
}

// ofRun counts the spans of LangSmith run id the sinks got.
func ofRun(id string, sinks ...*consumertest.TracesSink) int {
	want := ids.SpanID("langsmith/run", id)
	n := 0
	for _, s := range sinks {
		for sp := range spaniter.In(s.AllTraces()) {
			if sp.SpanID() == want {
				n++
			}
		}
	}
	return n
}

// The same for Langfuse: a batch whose new generation pushes a held one out of the
// full store sends it in its own request, so a refusal leaves both as they were, and
// the retry sends the held one once.
func TestLangfuseEvictionGoesWithItsBatch(t *testing.T) {
	lines := strings.Split(lfBatch, "\n")
	create := func(id string) []byte {
		return []byte(`{"batch":[` + lines[1] + strings.ReplaceAll(strings.TrimSuffix(lines[2], ","), "gen-1", id) + `]}`)
	}
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	gate := &switchable{next: sink}
	url, r := startStored(t, st, gate, func(c *Config) { c.MaxPending = 1 })
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	code, _, resp := do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", create("gen-1"), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)

	gate.refuse = true
	code, _, _ = do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", create("gen-2"), nil)
	require.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, 2, r.lfEvents.Pending(), "gen-1 and the trace root, held as before")
	assert.Equal(t, 2, st.Count(prefixObs))

	gate.refuse = false
	code, _, resp = do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", create("gen-2"), nil)
	require.Equal(t, http.StatusMultiStatus, code, resp)
	assert.Len(t, spansNamed(sink, "chat gpt-4o"), 1, "gen-1, pushed out as it was")
	assert.Equal(t, 2, r.lfEvents.Pending(), "gen-2 and the trace root")
	assert.Equal(t, 2, st.Count(prefixObs))
}
