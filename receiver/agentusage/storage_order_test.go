package agentusage

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// These tests hold the receiver to its storage order when the disk or the pipeline
// fails: what a request holds is written before anything of it goes on (a failed write
// is a 503 with nothing sent, so the SDK's retry sends nothing twice), and what went on
// leaves the disk after, its deletion tried again until the disk takes it (deleted
// before, a kill -9 while the pipeline had it lost it). Only a kill -9 before a refused
// deletion succeeds sends a run again, at the next start.

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

// A failed write answers 503 before anything of the request went on: the SDK's retry
// of a batch that finishes one run and holds another sends the finished one once.
func TestFailingDiskWriteSendsNothing(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	url, r := startStored(t, st, sink)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	finished := "01a22a31-cdeb-7000-8000-037a8c6bd3b4"
	batch := []byte(`{"post":[` + lsRun(finished, "", "llm", true) + `,` + lsRun(heldRunID, "", "llm", false) + `]}`)
	st.Fail(errDiskFull)
	code, hdr, _ := do(t, http.MethodPost, url+"/runs/batch", "application/json", batch, nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
	assert.Zero(t, sink.SpanCount(), "nothing of a request answered 503 went on")
	assert.Zero(t, r.runs.Pending())

	st.Fail(nil)
	code, _, resp := do(t, http.MethodPost, url+"/runs/batch", "application/json", batch, nil)
	require.Equal(t, http.StatusAccepted, code, resp)
	assert.Equal(t, 1, ofRun(finished, sink))
	assert.Equal(t, 1, st.Count(prefixRun), "the unfinished run is held on disk")
}

// A run that went on while the disk refused its deletion stays stored until a flush
// deletes it; then a kill -9 sends nothing again. Through a PATCH, a timeout and
// Shutdown's drain: Shutdown tries the deletions still owed before it stops.
func TestRefusedDeletionIsTriedAgain(t *testing.T) {
	// only the timeout case times out: in the others a slow machine must not send the
	// run before its PATCH comes
	short := func(c *Config) { c.PendingTimeout = 150 * time.Millisecond }
	long := func(*Config) {}
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		goOn func(t *testing.T, url string, r *usageReceiver, sink *consumertest.TracesSink)
		stop func(t *testing.T, r *usageReceiver)
	}{
		{"patch", long, func(t *testing.T, url string, _ *usageReceiver, sink *consumertest.TracesSink) {
			code, _, _ := do(t, http.MethodPatch, url+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
			require.Equal(t, http.StatusAccepted, code, "it went on: the SDK has nothing to send again")
		}, func(t *testing.T, r *usageReceiver) { kill(t, r) }},
		{"timeout", short, func(t *testing.T, _ string, _ *usageReceiver, sink *consumertest.TracesSink) {
			require.Eventually(t, func() bool { return chatsIn(sink) == 1 }, 5*time.Second, 10*time.Millisecond)
		}, func(t *testing.T, r *usageReceiver) { kill(t, r) }},
		{"shutdown", long, func(t *testing.T, url string, r *usageReceiver, _ *consumertest.TracesSink) {
			r.stopOnce.Do(func() { close(r.stop) }) // no more flushes: Shutdown must delete it
			code, _, _ := do(t, http.MethodPatch, url+"/runs/"+heldRunID, "application/json", []byte(runPatch), nil)
			require.Equal(t, http.StatusAccepted, code)
		}, func(t *testing.T, r *usageReceiver) { require.NoError(t, r.Shutdown(context.Background())) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storagetest.New()
			sink1 := new(consumertest.TracesSink)
			url1, r1 := startStored(t, st, sink1, tc.cfg)
			postHeldRun(t, url1)
			st.Fail(errDiskFull)
			tc.goOn(t, url1, r1, sink1)
			assert.Equal(t, 1, chatsIn(sink1))
			assert.Equal(t, 1, st.Count(prefixRun), "still stored: the disk refused the deletion")
			st.Fail(nil)
			if tc.name != "shutdown" {
				require.Eventually(t, func() bool { return st.Count(prefixRun) == 0 }, 5*time.Second, 10*time.Millisecond, "deleted at a flush")
			}
			tc.stop(t, r1)
			assert.Zero(t, st.Count(prefixRun))

			sink2 := new(consumertest.TracesSink)
			_, r2 := startStored(t, st, sink2, tc.cfg)
			require.NoError(t, r2.Shutdown(context.Background()))
			assert.Equal(t, 1, chatsIn(sink1, sink2), "once")
		})
	}
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

// The Langfuse ingestion face: an update that goes on while the disk refuses the
// generation's deletion stays stored until a flush deletes it; an update the pipeline
// refuses leaves the create and its trace root stored. Either way the generation goes
// on once, with the usage of its create.
func TestLangfuseFailingDiskAndRefusalSendTheGenerationOnce(t *testing.T) {
	lines := strings.Split(lfBatch, "\n")
	createOnly := `{"batch":[` + lines[1] + strings.TrimSuffix(lines[2], ",") + `]}`
	update := `{"batch":[` + lines[3] + `]}`
	t.Run("failing disk", func(t *testing.T) {
		st := storagetest.New()
		sink1 := new(consumertest.TracesSink)
		url1, r1 := startStored(t, st, sink1)
		code, _, resp := do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(createOnly), nil)
		require.Equal(t, http.StatusMultiStatus, code, resp)
		st.Fail(errDiskFull)
		code, _, resp = do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(update), nil)
		require.Equal(t, http.StatusMultiStatus, code, resp)
		assert.Equal(t, 1, chatsIn(sink1))
		assert.Equal(t, 2, st.Count(prefixObs), "the generation still stored")
		st.Fail(nil)
		require.Eventually(t, func() bool { return st.Count(prefixObs) == 1 }, 5*time.Second, 10*time.Millisecond, "deleted at a flush; the root waits")
		kill(t, r1)
		sink2 := new(consumertest.TracesSink)
		_, r2 := startStored(t, st, sink2)
		require.NoError(t, r2.Shutdown(context.Background()))
		assert.Equal(t, 1, chatsIn(sink1, sink2))
	})
	t.Run("refusing pipeline", func(t *testing.T) {
		st := storagetest.New()
		sink1 := new(consumertest.TracesSink)
		gate := &switchable{next: sink1}
		url1, r1 := startStored(t, st, gate)
		code, _, resp := do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(createOnly), nil)
		require.Equal(t, http.StatusMultiStatus, code, resp)
		gate.refuse = true
		code, _, _ = do(t, http.MethodPost, url1+"/api/public/ingestion", "application/json", []byte(update), nil)
		require.Equal(t, http.StatusTooManyRequests, code)
		assert.Zero(t, chatsIn(sink1))
		assert.Equal(t, 2, st.Count(prefixObs), "the generation and its trace root stay stored")
		kill(t, r1)

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

// Shutdown whose context ends while a request is with the pipeline drains the held runs
// only after that request: the run it completes goes on once. (Found by review.)
func TestShutdownTimeoutDrainsAfterTheRequestInFlight(t *testing.T) {
	st := storagetest.New()
	sink := new(consumertest.TracesSink)
	g := newGatedNext(sink)
	url, r := startStored(t, st, g)
	postHeldRun(t, url)

	g.armed.Store(true)
	answered := doAsync(t, http.MethodPatch, url+"/runs/"+heldRunID, []byte(runPatch))
	<-g.entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- r.Shutdown(ctx) }()
	time.Sleep(300 * time.Millisecond) // the server's Shutdown gave up on the request
	close(g.release)
	<-answered
	<-stopped
	assert.Equal(t, 1, ofRun(heldRunID, sink), "by the PATCH, not again by the drain")
}
