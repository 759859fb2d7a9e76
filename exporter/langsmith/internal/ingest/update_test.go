package ingest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/runtree"
)

// recorder answers every request with status and records its method, path and body.
type recorder struct {
	mu     sync.Mutex
	status int
	seen   []string
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path)
	r.bodies = append(r.bodies, b)
	return &http.Response{StatusCode: r.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// An update the exporter could not place goes by itself to PATCH /runs/{id}, as one JSON
// run without trace_id, dotted_order or parent_run_id; a 404 there (the run not ingested
// yet) is retryable, not final.
func TestUnplacedUpdateGoesToTheRunsPath(t *testing.T) {
	runs := encodedAgentTrace(t, 7)
	require.GreaterOrEqual(t, len(runs), 2)
	u := runs[1]
	u.Patch, u.Unplaced = true, true
	// a head that knows its place: the update writes it without
	head := runtree.Head{ID: u.ID, TraceID: runs[0].ID, DottedOrder: "20260101T000000000000Z" + runs[0].ID, ParentRunID: runs[0].ID,
		Name: "chat", RunType: "llm", StartTime: "2026-01-01T00:00:00Z", SessionName: "p", Status: "success", Unplaced: true}
	u.Head = head.AppendJSON(nil)

	rec := &recorder{status: http.StatusAccepted}
	c, err := NewClient(&http.Client{Transport: rec}, "http://langsmith.invalid", "k", "", CompressionNone, zap.NewNop())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.PatchRun(context.Background(), &u))
	assert.Equal(t, []string{"PATCH " + PathRuns + u.ID}, rec.seen)
	var run map[string]any
	require.NoError(t, json.Unmarshal(rec.bodies[0], &run))
	assert.Equal(t, u.ID, run["id"])
	for _, k := range []string{"trace_id", "dotted_order", "parent_run_id"} {
		assert.NotContains(t, run, k)
	}
	for _, k := range []string{"inputs", "outputs", "extra"} {
		assert.Contains(t, run, k)
	}

	rec.status, rec.seen = http.StatusNotFound, nil
	err = c.PatchRun(context.Background(), &u)
	require.ErrorIs(t, err, ErrRunNotIngested)
	assert.False(t, consumererror.IsPermanent(err), "%v", err)
	assert.Equal(t, []string{"PATCH " + PathRuns + u.ID}, rec.seen)
}
