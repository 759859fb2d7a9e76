package langfuse

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
)

// damagedBodies are queued batches of two agent runs (a resource each) whose body was
// damaged on disk: cut inside a message, and cut at the first resource's end, which
// still parses, with the first run's spans only.
func damagedBodies(t *testing.T, e *langfuseExporter) map[string]*spans {
	t.Helper()
	r := queued(t, e, traceBatch(2))
	body := r.body()
	_, _, first := protowire.ConsumeField(body)
	require.Positive(t, first)
	require.Less(t, first, len(body))
	return map[string]*spans{
		"cut inside a message": newSpans(body[:first-1], r.versions),
		"cut at a resource":    newSpans(body[:first], r.versions),
	}
}

// A damaged queued batch is an error of its own, named, never a panic, and is never sent
// short: not when it is read from the queue, not when it is cut to the batch size, and
// not when Langfuse refuses it as too large and it is split.
func TestDamagedQueuedBatchIsRefused(t *testing.T) {
	e := newTestExporter(t)
	e.client = &http.Client{Transport: vendortest.Discard(http.StatusRequestEntityTooLarge)}
	for name, r := range damagedBodies(t, e) {
		t.Run(name, func(t *testing.T) {
			require.NotPanics(t, func() {
				_, err := r.MergeSplit(context.Background(), 1, exporterhelper.RequestSizerTypeItems, nil)
				assert.ErrorContains(t, err, "a queued batch")
			})
			require.NotPanics(t, func() {
				err := e.push(context.Background(), r)
				require.Error(t, err)
				assert.True(t, consumererror.IsPermanent(err), "%v", err)
			})

			enc := queueEncoding{e}
			rec, err := enc.Marshal(context.Background(), r)
			require.NoError(t, err)
			_, _, err = enc.Unmarshal(rec)
			assert.ErrorContains(t, err, "a queued batch")
		})
	}
}

// A damaged batch that Langfuse takes whole is not sent either: read from the queue, it
// is refused before it reaches push.
func TestDamagedQueuedBatchIsNotSentShort(t *testing.T) {
	e := newTestExporter(t)
	r := damagedBodies(t, e)["cut at a resource"]
	enc := queueEncoding{e}
	rec, err := enc.Marshal(context.Background(), r)
	require.NoError(t, err)
	_, got, err := enc.Unmarshal(rec)
	assert.Nil(t, got)
	n := len(r.versions)
	assert.ErrorContains(t, err, fmt.Sprintf("holds %d spans, its head names %d", n/2, n))
}
