package langsmith

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

// behindFront puts a faulty front (the reliability suite's) before the fake and points
// the exporter at it.
func behindFront(t *testing.T, fake *fakevendor.LangSmith) (*faulty.Front, func(*Config)) {
	t.Helper()
	front := faulty.New(faulty.LangSmith, fake.Config.Handler)
	srv := front.Serve()
	t.Cleanup(srv.Close)
	return front, func(c *Config) { c.ClientConfig.Endpoint = srv.URL }
}

// deliveredOnce asserts every run of the fake's 2xx requests was delivered exactly once.
func deliveredOnce(t *testing.T, fake *fakevendor.LangSmith, want int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range fake.Requests() {
		if r.Status/100 == 2 {
			for _, id := range r.RunIDs {
				seen[id]++
			}
		}
	}
	assert.Len(t, seen, want, "runs delivered")
	for id, n := range seen {
		assert.Equal(t, 1, n, "run %s delivered more than once", id)
	}
}

// A server whose real limit is below /info's: the exporter halves the request until each
// part fits, on both ingest endpoints, and loses nothing.
func TestTooLargeSplitsUntilItFits(t *testing.T) {
	for _, multipart := range []bool{true, false} {
		name := map[bool]string{true: "multipart", false: "batch"}[multipart]
		t.Run(name, func(t *testing.T) {
			fake := newFake(t)
			fake.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: multipart, SizeLimit: 100, SizeLimitBytes: 20 << 20})
			front, endpoint := behindFront(t, fake)
			front.Set(faulty.Fault{Kind: faulty.TooLarge, MaxItems: 2})
			h := mustStart(t, fake, endpoint)
			td, _ := fakevendor.AgentTrace(1, base)
			require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))

			st := front.Stats()
			assert.Equal(t, 8, st.Accepted)
			assert.Zero(t, st.Duplicates)
			assert.Zero(t, st.Refused, "no run refused for good")
			// 8 -> 413; 4 -> 413, 2, 2; 4 -> 413, 2, 2
			assert.Equal(t, 3, st.Faulted[http.StatusRequestEntityTooLarge])
			assert.Equal(t, 7, st.Requests)
			assert.Equal(t, 8, fake.RunCount())
			deliveredOnce(t, fake, 8)
			wantPath := map[bool]string{true: "/runs/multipart", false: "/runs/batch"}[multipart]
			for _, r := range fake.Requests() {
				assert.Equal(t, wantPath, r.Path)
			}
			assert.Empty(t, fake.Violations())
		})
	}
}

// A single run that still gets 413 cannot be split: a permanent error naming the run and
// its size; the other runs are delivered.
func TestTooLargeSingleRunIsPermanent(t *testing.T) {
	fake := newFake(t)
	front, endpoint := behindFront(t, fake)
	front.Set(faulty.Fault{Kind: faulty.TooLarge, MaxItems: 0}) // no request is small enough
	h := mustStart(t, fake, endpoint)
	td, _ := fakevendor.AgentTrace(1, base)
	err := h.exp.ConsumeTraces(context.Background(), td)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "is over LangSmith's request size limit on its own")
	assert.Contains(t, err.Error(), "bytes before compression")
	assert.Contains(t, err.Error(), "HTTP 413")
	runs, _ := newExporter(&Config{Project: "p", MaxCachedSpans: 100}, exportertest.NewNopSettings(componentType)).mapper.Map(td)
	require.Len(t, runs, 8)
	for _, r := range runs {
		assert.Contains(t, err.Error(), "run "+r.Head.ID+" (", "the error names every dropped run")
	}
	st := front.Stats()
	assert.Equal(t, 15, st.Requests, "a full binary split of 8 runs, nothing resent")
	assert.Equal(t, 8, st.Refused)
	assert.Zero(t, fake.RunCount())
	assert.Equal(t, 8, h.logs.FilterMessageSnippet("dropping them").Len(), "each dropped run is logged")
}

// One half delivered, the other answered 503: the retry carries only the failed half, so
// no run is sent twice and none is lost.
func TestTooLargeSplitRetriesOnlyTheRetryableHalf(t *testing.T) {
	fake := newFake(t)
	front, endpoint := behindFront(t, fake)
	front.Script(
		faulty.Fault{Kind: faulty.Status, Status: http.StatusRequestEntityTooLarge}, // 8 runs
		faulty.Fault{}, // first 4: delivered
		faulty.Fault{Kind: faulty.Status, Status: http.StatusServiceUnavailable}, // last 4
	)
	h := mustStart(t, fake, endpoint)
	td, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), td))
	st := front.Stats()
	assert.Equal(t, 8, st.Accepted)
	assert.Zero(t, st.Duplicates, "the delivered half was not sent again")
	assert.Equal(t, 4, st.Requests) // 413, 4 ok, 4 -> 503, 4 ok on retry
	deliveredOnce(t, fake, 8)
	var sizes []int
	for _, r := range fake.Requests() {
		sizes = append(sizes, len(r.RunIDs))
	}
	assert.Equal(t, []int{4, 4}, sizes, "the fake sees the two delivered halves only")
	assert.Empty(t, fake.Violations())
}

// bodyLimit answers 413 to bodies over max bytes, as a proxy's body limit does, and
// passes the rest to next.
type bodyLimit struct {
	max     int
	next    http.Handler
	refused atomic.Int32
}

func (b *bodyLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost && len(body) > b.max {
		b.refused.Add(1)
		http.Error(w, `{"detail":"Request Entity Too Large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.next.ServeHTTP(w, r)
}

// /info announces 20 MiB but a proxy stops bodies at 6 KB: the first batch learns the real
// limit from its 413s, so the next batch is cut below it and needs fewer (here no) splits.
func TestTooLargeLowersTheByteLimit(t *testing.T) {
	fake := newFake(t)
	limit := &bodyLimit{max: 6000, next: fake.Config.Handler}
	srv := httptest.NewServer(limit)
	t.Cleanup(srv.Close)
	h := mustStart(t, fake, func(c *Config) {
		c.ClientConfig.Endpoint = srv.URL
		c.ClientConfig.Compression = "none" // the proxy counts the bytes Split estimates
	})
	first, _ := fakevendor.AgentTrace(1, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), first))
	refusedFirst := limit.refused.Load()
	require.Positive(t, refusedFirst, "the first batch hit the proxy's limit")
	lowered := h.logs.FilterMessageSnippet("lowering it for later batches").All()
	require.NotEmpty(t, lowered)
	assert.Less(t, lowered[len(lowered)-1].ContextMap()["size_limit_bytes"], int64(20<<20))

	second, _ := fakevendor.AgentTrace(2, base)
	require.NoError(t, h.exp.ConsumeTraces(context.Background(), second))
	t.Logf("413s: first batch %d, second batch %d", refusedFirst, limit.refused.Load()-refusedFirst)
	assert.Less(t, limit.refused.Load()-refusedFirst, refusedFirst, "the second batch is cut by the learned limit")
	assert.Equal(t, 16, fake.RunCount())
	deliveredOnce(t, fake, 16)
	for _, r := range fake.Requests() {
		if r.Status/100 == 2 {
			assert.LessOrEqual(t, r.RawBytes, 6000)
		}
	}
	assert.Empty(t, fake.Violations())
}

// The remembered limit only goes down, also under concurrent 413s.
func TestLowerByteLimitIsMonotonic(t *testing.T) {
	e := newExporter(&Config{Project: "p", MaxCachedSpans: 10}, exportertest.NewNopSettings(componentType))
	e.logger = zap.NewNop()
	e.maxBytes.Store(20 << 20)
	e.lowerByteLimit(50_000)
	assert.EqualValues(t, 49_999, e.maxBytes.Load())
	e.lowerByteLimit(80_000) // a larger refused request says nothing new
	assert.EqualValues(t, 49_999, e.maxBytes.Load())
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.lowerByteLimit(10_000 + i*100)
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 9_999, e.maxBytes.Load())
	assert.Equal(t, 9_999, e.currentLimits().MaxBytes, "later batches are cut by it")
}
