package faulty

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// A collector that refuses for a while: the application goes on ending runs, the
// refused request is resent with a growing backoff, the runs that piled up meanwhile go
// out in full batches afterwards, and every run ended is accepted once.
func TestBatcherKeepsTheRateThroughRefusals(t *testing.T) {
	var mu sync.Mutex
	refuse := true
	var sizes []int
	var refusedAt []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err == nil {
			err = req.UnmarshalProto(body)
		}
		if err != nil { // asserted off the test goroutine would not stop the test
			t.Errorf("request body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			refusedAt = append(refusedAt, time.Now())
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		sizes = append(sizes, req.Traces().SpanCount()/3)
	}))
	defer srv.Close()

	l := &Load{Addr: srv.Listener.Addr().String(), Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}
	b := &Batcher{Load: l, RunsPerSecond: 2000, MaxRuns: 50, Delay: 20 * time.Millisecond, FirstRun: 7000}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, context.Background()) }()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	refuse = false
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done

	s, bs := l.Stats(), b.Stats()
	assert.Positive(t, s.Refusals[503])
	assert.Zero(t, bs.Waiting, "what was waiting at the end was sent")
	assert.Greater(t, bs.Ended, 300, "runs were ended while the collector refused")
	assert.Equal(t, 3*bs.Ended, s.Spans, "every run ended was accepted")
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range sizes {
		assert.LessOrEqual(t, n, 50)
		total += n
	}
	assert.Equal(t, bs.Ended, total, "each run sent once")
	// the first is the request resent through the refusals; the runs that piled up
	// meanwhile go out in full batches after it
	require.GreaterOrEqual(t, len(sizes), 2)
	assert.Equal(t, 50, sizes[1], "the runs piled up during the refusals go out in full batches")
	require.GreaterOrEqual(t, len(refusedAt), 4)
	assert.GreaterOrEqual(t, refusedAt[3].Sub(refusedAt[2]), 35*time.Millisecond, "the backoff grew to MaxBackoff")

	answers := l.Answers()
	assert.Len(t, answers, s.Refusals[503]+s.Requests)
	for _, a := range answers {
		assert.Contains(t, []int{200, 503}, a.Status)
		assert.Positive(t, a.Took)
	}
}
