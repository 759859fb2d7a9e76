package agentusage

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
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
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/internal/storagetest"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
)

// These tests hold the receiver to max_pending with storage on: what a full store
// pushes out goes on with the request that needs its room (a refusal leaves it held,
// a kill -9 before it went on finds it stored), and one request never holds more than
// the bound, even when a restart held the store past it.

// A restart that finds more stored than max_pending sends the oldest at once; while
// the disk refuses their deletion they stay stored, and go on once all the same.
func TestRestartOverTheBoundSendsEachRunOnce(t *testing.T) {
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
	assert.Equal(t, 1, chatsIn(sink2), "the oldest went on")
	assert.Equal(t, 1, r2.runs.Pending())
	assert.Equal(t, 2, st.Count(prefixRun), "its deletion is owed")
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
// after the evicted POST. (Found by review.)
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
	select {
	case <-patched:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the eviction's deletion never came")
	}
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

// One request that holds more new runs (or trace roots) than max_pending holds no more
// than max_pending: the first new ones go on at once, as a full store's oldest would.
func TestOneRequestHoldsNoMoreThanMaxPending(t *testing.T) {
	two := func(c *Config) { c.MaxPending = 2 }
	t.Run("langsmith", func(t *testing.T) {
		st := storagetest.New()
		sink := new(consumertest.TracesSink)
		url, r := startStored(t, st, sink, two)
		defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
		body := `{"post":[` + lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3c1", "", "llm", false) + `,` +
			lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3c2", "", "llm", false) + `,` +
			lsRun("01a22a31-cdeb-7000-8000-037a8c6bd3c3", "", "llm", false) + `]}`
		code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", []byte(body), nil)
		require.Equal(t, http.StatusAccepted, code, resp)
		assert.Equal(t, 2, r.runs.Pending())
		assert.Equal(t, 2, st.Count(prefixRun))
		assert.Equal(t, 1, chatsIn(sink), "one went on")
	})
	t.Run("langfuse roots", func(t *testing.T) {
		st := storagetest.New()
		sink := new(consumertest.TracesSink)
		url, r := startStored(t, st, sink, two)
		defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
		body := `{"batch":[
 {"id":"e1","type":"trace-create","timestamp":"2026-01-02T03:04:05.000Z","body":{"id":"trace-1","name":"a"}},
 {"id":"e2","type":"trace-create","timestamp":"2026-01-02T03:04:05.000Z","body":{"id":"trace-2","name":"b"}},
 {"id":"e3","type":"trace-create","timestamp":"2026-01-02T03:04:05.000Z","body":{"id":"trace-3","name":"c"}}
]}`
		code, _, resp := do(t, http.MethodPost, url+"/api/public/ingestion", "application/json", []byte(body), nil)
		require.Equal(t, http.StatusMultiStatus, code, resp)
		assert.Equal(t, 2, r.lfEvents.Pending())
		assert.Equal(t, 2, st.Count(prefixObs))
		assert.Equal(t, 1, sink.SpanCount(), "one root went on")
	})
}

// gatedNext blocks the first ConsumeTraces after arm until release; released with drop,
// it passes nothing on (the process is gone).
type gatedNext struct {
	next    consumer.Traces
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	drop    atomic.Bool
}

func newGatedNext(next consumer.Traces) *gatedNext {
	return &gatedNext{next: next, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedNext) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (g *gatedNext) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
		if g.drop.Load() {
			return nil
		}
	}
	return g.next.ConsumeTraces(ctx, td)
}

// doAsync sends a request from another goroutine; its status (0: no answer) comes on
// the channel.
func doAsync(t *testing.T, method, url string, body []byte) chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// kill -9 while a request's spans are with the pipeline: the run it pushed out of the
// full store is still stored, so the restart sends it. (Deleted before it went on, it
// was lost. Found by review.)
func TestKillWhileAnEvictedRunIsWithThePipelineLosesNothing(t *testing.T) {
	st := storagetest.New()
	sink1 := new(consumertest.TracesSink)
	g := newGatedNext(sink1)
	oneRoom := func(c *Config) { c.MaxPending = 1 }
	url1, r1 := startStored(t, st, g, oneRoom)
	postHeldRun(t, url1)

	g.armed.Store(true)
	other := "01a22a31-cdeb-7000-8000-037a8c6bd3b2"
	body := []byte(lsRun(other, "", "chain", false))
	answered := doAsync(t, http.MethodPost, url1+"/runs", body)
	<-g.entered
	kill(t, r1)
	assert.Zero(t, <-answered, "no answer: the SDK sends it again")
	g.drop.Store(true)
	defer close(g.release)

	sink2 := new(consumertest.TracesSink)
	url2, r2 := startStored(t, st, sink2) // room for both: the restart evicts neither
	code, _, resp := do(t, http.MethodPost, url2+"/runs", "application/json", body, nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	require.NoError(t, r2.Shutdown(context.Background()))
	assert.Equal(t, 1, ofRun(other, sink1, sink2))
	assert.Equal(t, 1, ofRun(heldRunID, sink1, sink2), "the evicted run, acknowledged long before")
}

// A restart that cannot hand on what it pushed out holds it again, past max_pending. A
// request that names every held run then has room for none of its new ones: they go on
// at once, the held ones stay held, and the face answers the next request (a panic
// while it planned this left the face locked for every later request, the flush and
// Shutdown).
func TestRequestPastTheBoundAfterARestart(t *testing.T) {
	const other, third = "01a22a31-cdeb-7000-8000-037a8c6bd3b2", "01a22a31-cdeb-7000-8000-037a8c6bd3b3"
	one := func(c *Config) { c.MaxPending = 1; c.PendingTimeout = time.Hour }
	st := storagetest.New()
	url1, r1 := startStored(t, st, new(consumertest.TracesSink), one)
	dc := &deleteFailing{WalkClient: r1.store.client}
	r1.store.client = dc
	postHeldRun(t, url1)
	dc.fail.Store(true)
	code, _, resp := do(t, http.MethodPost, url1+"/runs", "application/json", []byte(lsRun(other, "", "llm", false)), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	require.Equal(t, 2, st.Count(prefixRun), "the pushed-out run's deletion is owed")
	kill(t, r1)

	sink := new(consumertest.TracesSink)
	g := &atomicGate{next: sink}
	g.refuse.Store(true)
	url2, r2 := startStored(t, st, g, one)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	g.refuse.Store(false)
	require.Equal(t, 2, r2.runs.Pending(), "held again past the bound")

	batch := []byte(`{"post":[` + lsRun(heldRunID, "", "llm", false) + `,` + lsRun(other, "", "llm", false) + `,` +
		lsRun(third, "", "llm", false) + `]}`)
	code, _, resp = do(t, http.MethodPost, url2+"/runs/batch", "application/json", batch, nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 1, chatsIn(sink), "the new run went on at once")
	code, _, resp = do(t, http.MethodPatch, url2+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 2, chatsIn(sink), "the face still answers: the PATCH completed a held run")
	r2.runsMu.Lock()
	assert.Equal(t, 1, r2.runs.Pending())
	r2.runsMu.Unlock()
}
