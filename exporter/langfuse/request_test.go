package langfuse

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatareq "go.opentelemetry.io/collector/pdata/xpdata/request"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/shape"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/envconfig"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// newTestExporter is an exporter for converting batches, never started.
func newTestExporter(t *testing.T) *langfuseExporter {
	t.Helper()
	cfg := newConfig(envconfig.FromMap(nil))
	cfg.Enabled, cfg.PublicKey, cfg.SecretKey = true, "pk-lf-test", "sk-lf-test"
	e, err := newExporter(cfg, exportertest.NewNopSettings(componentType))
	require.NoError(t, err)
	return e
}

// queued converts td as queueing it does.
func queued(t *testing.T, e *langfuseExporter, td ptrace.Traces) *spans {
	t.Helper()
	req, err := e.convert(context.Background(), td)
	require.NoError(t, err)
	return req.(*spans)
}

// reemitted is a batch of n agent runs whose first span is a re-emission (revision 2).
func reemitted(n int) ptrace.Traces {
	td := traceBatch(n)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sp.Attributes().PutInt(genai.AttrMergeRevision, 2)
	return td
}

// spanIDs decodes body and lists its span ids in order.
func spanIDs(t *testing.T, body []byte) []pcommon.SpanID {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	require.NoError(t, err)
	var ids []pcommon.SpanID
	for sp := range spaniter.All(td) {
		ids = append(ids, sp.SpanID())
	}
	return ids
}

// versionIDs lists the span ids of vs.
func versionIDs(vs []vendorhttp.Version) []pcommon.SpanID {
	ids := make([]pcommon.SpanID, len(vs))
	for i, v := range vs {
		ids[i] = v.Key.Span
	}
	return ids
}

func TestConvertShapesAndKeepsTheBatch(t *testing.T) {
	e := newTestExporter(t)
	td := reemitted(2)
	before := ptrace.NewTraces()
	td.CopyTo(before)
	r := queued(t, e, td)
	assert.Equal(t, before, td, "the batch is not changed")
	assert.Equal(t, td.SpanCount(), r.ItemsCount())
	assert.Equal(t, versionIDs(r.versions), spanIDs(t, r.body()), "one version per span, in the body's order")
	assert.Equal(t, int64(2), r.versions[0].Rev)

	got, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(r.body())
	require.NoError(t, err)
	sp := got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	_, shaped := sp.Attributes().Get(shape.AttrTraceTags)
	assert.True(t, shaped, "the body carries the Langfuse attributes")
}

func TestQueueEncodingRoundTrip(t *testing.T) {
	e := newTestExporter(t)
	r := queued(t, e, reemitted(3))
	ctx := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"tenant": {"a"}})})
	enc := queueEncoding{e}
	b, err := enc.Marshal(ctx, r)
	require.NoError(t, err)
	gotCtx, got, err := enc.Unmarshal(b)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.Equal(t, []string{"a"}, client.FromContext(gotCtx).Metadata.Get("tenant"), "the request's context is kept")

	for _, cut := range []int{1, 3, 10, len(b) - len(r.body()) - 1} {
		_, _, err := enc.Unmarshal(b[:cut])
		assert.Error(t, err, "cut at %d", cut)
	}
}

// In front of a persistent queue, convert splices the body behind its stored head, so
// storing the request hands over that record as it is; a request changed since (merged
// with another), or stored under another context, is encoded anew. Either way the
// record is the one the copying encoding makes, and reads back as the request.
func TestQueueEncodingStoresTheRecordConvertMade(t *testing.T) {
	ctx := client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(map[string][]string{"tenant": {"a"}})})
	plain, e := newTestExporter(t), newTestExporter(t)
	e.persistent = true
	enc := queueEncoding{e}
	convert := func(e *langfuseExporter, ctx context.Context, td ptrace.Traces) *spans {
		req, err := e.convert(ctx, td)
		require.NoError(t, err)
		return req.(*spans)
	}
	td := reemitted(3)
	r := convert(e, ctx, td)
	b, err := enc.Marshal(ctx, r)
	require.NoError(t, err)
	assert.Same(t, &r.record[0], &b[0], "the record convert made is stored, not a copy")
	want, err := enc.Marshal(ctx, convert(plain, ctx, td))
	require.NoError(t, err)
	assert.Equal(t, want, b, "the same record as the copying encoding")
	gotCtx, got, err := enc.Unmarshal(b)
	require.NoError(t, err)
	assert.Equal(t, r.body(), got.(*spans).body())
	assert.Equal(t, r.versions, got.(*spans).versions)
	assert.Equal(t, []string{"a"}, client.FromContext(gotCtx).Metadata.Get("tenant"))

	other, err := enc.Marshal(context.Background(), convert(e, ctx, td))
	require.NoError(t, err)
	wantOther, err := enc.Marshal(context.Background(), convert(plain, ctx, td))
	require.NoError(t, err)
	assert.Equal(t, wantOther, other, "stored under another context: encoded for that one")

	more := reemitted(1)
	merge := func(e *langfuseExporter) *spans {
		r := convert(e, ctx, td)
		_, err := r.MergeSplit(context.Background(), 0, exporterhelper.RequestSizerTypeItems, convert(e, ctx, more))
		require.NoError(t, err)
		return r
	}
	merged := merge(e)
	b, err = enc.Marshal(ctx, merged)
	require.NoError(t, err)
	want, err = enc.Marshal(ctx, merge(plain))
	require.NoError(t, err)
	assert.Equal(t, want, b, "a merged request is encoded anew, both bodies in it")
	_, got, err = enc.Unmarshal(b)
	require.NoError(t, err)
	assert.Equal(t, merged.ItemsCount(), got.ItemsCount())
	assert.Equal(t, merged.body(), got.(*spans).body())
}

// A queue on disk filled by an earlier version holds the collector's encoding of each
// batch, or, older still, bare OTLP: both are read and shaped as if queued now.
func TestQueueReadsWhatAnEarlierVersionStored(t *testing.T) {
	e := newTestExporter(t)
	td := reemitted(2)
	want := queued(t, newTestExporter(t), td)
	enc := queueEncoding{e}

	withCtx, err := pdatareq.MarshalTraces(context.Background(), td)
	require.NoError(t, err)
	bare, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	for name, b := range map[string][]byte{"request encoding": withCtx, "bare OTLP": bare} {
		_, got, err := enc.Unmarshal(b)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
	_, _, err = enc.Unmarshal([]byte{0x0A, 0xFF})
	assert.Error(t, err, "what does not decode is an error, not a panic")
}

func TestMergeSplit(t *testing.T) {
	e := newTestExporter(t)
	for _, tc := range []struct {
		name string
		szt  exporterhelper.RequestSizerType
		max  func(a, b *spans) int
	}{
		{"items", exporterhelper.RequestSizerTypeItems, func(a, _ *spans) int { return a.ItemsCount()/2 + 1 }},
		{"bytes", exporterhelper.RequestSizerTypeBytes, func(a, _ *spans) int { return a.BytesSize() / 3 }},
		{"no limit", exporterhelper.RequestSizerTypeItems, func(*spans, *spans) int { return 0 }},
		{"under the limit", exporterhelper.RequestSizerTypeBytes, func(a, b *spans) int { return a.BytesSize() + b.BytesSize() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := queued(t, e, reemitted(2)), queued(t, e, traceBatch(3))
			wantIDs := append(spanIDs(t, a.body()), spanIDs(t, b.body())...)
			wantVersions := append(append([]vendorhttp.Version(nil), a.versions...), b.versions...)
			maxSize := tc.max(a, b)
			out, err := a.MergeSplit(context.Background(), maxSize, tc.szt, b)
			require.NoError(t, err)
			var ids []pcommon.SpanID
			var versions []vendorhttp.Version
			for i, r := range out {
				p := r.(*spans)
				got := spanIDs(t, p.body())
				assert.Equal(t, versionIDs(p.versions), got, "piece %d: versions follow its body", i)
				if maxSize > 0 {
					size := p.ItemsCount()
					if tc.szt == exporterhelper.RequestSizerTypeBytes {
						size = p.BytesSize()
					}
					assert.LessOrEqual(t, size, maxSize, "piece %d", i)
				}
				ids, versions = append(ids, got...), append(versions, p.versions...)
			}
			assert.Equal(t, wantIDs, ids, "every span once, in order")
			assert.Equal(t, wantVersions, versions)
			assert.Same(t, a, out[len(out)-1].(*spans), "the rest stays in the request merged into")
			if tc.name == "items" || tc.name == "bytes" {
				assert.Greater(t, len(out), 1)
			}
		})
	}

	t.Run("a span over max_size", func(t *testing.T) {
		a := queued(t, e, traceBatch(1))
		_, err := a.MergeSplit(context.Background(), 10, exporterhelper.RequestSizerTypeBytes, nil)
		assert.ErrorContains(t, err, "over the batch's max_size")
	})
	t.Run("another request type", func(t *testing.T) {
		_, err := queued(t, e, traceBatch(1)).MergeSplit(context.Background(), 0, exporterhelper.RequestSizerTypeItems, otherRequest{})
		assert.Error(t, err)
	})
}

type otherRequest struct{ xexporterhelper.Request }

func TestOnErrorKeepsWhatIsLeft(t *testing.T) {
	e := newTestExporter(t)
	r, rest := queued(t, e, traceBatch(2)), queued(t, e, traceBatch(1))
	assert.Same(t, r, r.OnError(errors.New("down")), "a whole push failed: all of it again")
	partial := &retryParts{err: errors.New("503"), spans: rest}
	assert.Same(t, rest, r.OnError(partial), "only what was not delivered")
	assert.EqualError(t, partial, "503")
}
