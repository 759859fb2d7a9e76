package runtree

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/dottedorder/dottedordertest"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

// placedSpan is a span of trace {9} started at base+at, with parent (zero: a root) and,
// when dotted is set, the placement its emitter gave it.
func placedSpan(id, parent byte, at time.Duration, dotted string) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{9})
	sp.SetSpanID(pcommon.SpanID{id})
	if parent != 0 {
		sp.SetParentSpanID(pcommon.SpanID{parent})
	}
	sp.SetName("span")
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(at)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(at + time.Millisecond)))
	if dotted != "" {
		sp.Attributes().PutStr(genai.AttrLSDottedOrder, dotted)
	}
	return td
}

// Spans end before their parents. One whose emitter placed it when it started goes in
// at once with its true chain, before any ancestor has been mapped, and a span without
// a placement that comes after it hangs under it.
func TestEmitterPlacedRunsGoInBeforeTheirParents(t *testing.T) {
	traceUUID := dottedorder.TraceUUID(pcommon.TraceID{9})
	root := string(dottedorder.AppendSegment(nil, base.UnixMicro(), traceUUID))
	agent := dottedorder.Child(root, base.Add(time.Millisecond).UnixMicro(), pcommon.SpanID{2})
	chat := dottedorder.Child(agent, base.Add(2*time.Millisecond).UnixMicro(), pcommon.SpanID{3})

	m := NewMapper("p", 100)
	check := func(td ptrace.Traces, wantDotted, wantParent string) Run {
		t.Helper()
		runs, skipped := m.Map(td)
		require.Zero(t, skipped)
		require.Len(t, runs, 1)
		r := runs[0]
		assert.Equal(t, wantDotted, r.Head.DottedOrder)
		assert.Equal(t, wantParent, r.Head.ParentRunID)
		assert.Equal(t, traceUUID, r.Head.TraceID)
		md := meta(t, r)
		assert.NotContains(t, md, keyOrphan)
		assert.NotContains(t, md, genai.AttrLSDottedOrder, "the placement is the run's, not metadata")
		assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, r)))
		return r
	}
	// the model call first, its agent run next, the root last
	r := check(placedSpan(3, 2, 2*time.Millisecond, chat), chat, dottedorder.SpanUUID(pcommon.SpanID{2}))
	assert.Equal(t, dottedorder.SpanUUID(pcommon.SpanID{3}), r.Head.ID)
	// a tool span of the model call's without a placement, in a later batch
	tool := dottedorder.Child(chat, base.Add(3*time.Millisecond).UnixMicro(), pcommon.SpanID{4})
	check(placedSpan(4, 3, 3*time.Millisecond, ""), tool, dottedorder.SpanUUID(pcommon.SpanID{3}))
	check(placedSpan(2, 1, time.Millisecond, agent), agent, traceUUID)
	r = check(placedSpan(1, 0, 0, root), root, "")
	assert.Equal(t, traceUUID, r.Head.ID)

	// a re-emission of the model call is placed where the run is
	check(placedSpan(3, 2, 2*time.Millisecond, chat), chat, dottedorder.SpanUUID(pcommon.SpanID{2}))
}

// A placement that is not a well-formed dotted_order is ignored: the span is placed as
// one without it (here, an orphan whose ancestors were not seen: re-rooted).
func TestMalformedPlacementIsIgnored(t *testing.T) {
	for _, bad := range []string{"x", "20260304T050607123Z" + dottedorder.SpanUUID(pcommon.SpanID{3})} {
		runs, _ := NewMapper("p", 100).Map(placedSpan(3, 2, 0, bad))
		require.Len(t, runs, 1)
		assert.Equal(t, runs[0].Head.ID, runs[0].Head.TraceID)
		assert.Equal(t, OrphanRerooted, meta(t, runs[0])[keyOrphan])
	}
}

// Random trees in random batches and orders: every placed span's run is exactly where its
// placement says, whatever came before it, and an unplaced span among them is placed
// under its parent when the parent was mapped first, else as an orphan. Every run keeps
// LangSmith's rules.
func TestPropertyPlacedRunsWhateverTheOrder(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		n := 2 + r.IntN(30)
		tid := pcommon.TraceID{byte(seed), byte(seed >> 8), 7}
		for i := range n {
			sp := spans.AppendEmpty()
			sp.SetTraceID(tid)
			sp.SetSpanID(pcommon.SpanID{1, byte(i), byte(seed)})
			at := base.Add(time.Duration(i) * time.Millisecond)
			if i > 0 {
				sp.SetParentSpanID(pcommon.SpanID{1, byte(r.IntN(i)), byte(seed)})
				// a child may start before its parent (clock skew): the placement clamps it
				at = at.Add(-time.Duration(r.IntN(3)) * time.Millisecond)
			}
			sp.SetName("span")
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Second)))
		}
		dottedordertest.Place(td)
		want := map[pcommon.SpanID]string{}
		for i := 0; i < spans.Len(); i++ {
			sp := spans.At(i)
			v, _ := sp.Attributes().Get(genai.AttrLSDottedOrder)
			want[sp.SpanID()] = v.Str()
			if seed%2 == 0 && r.IntN(4) == 0 {
				sp.Attributes().Remove(genai.AttrLSDottedOrder) // an emitter that does not place it
			}
		}
		order := r.Perm(n)
		m := NewMapper("p", 1000)
		mapped := map[pcommon.SpanID]Run{}
		for len(order) > 0 {
			k := 1 + r.IntN(len(order))
			batch := ptrace.NewTraces()
			bs := batch.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for _, i := range order[:k] {
				spans.At(i).CopyTo(bs.AppendEmpty())
			}
			order = order[k:]
			runs, _ := m.Map(batch)
			for i, run := range runs {
				sp := bs.At(i)
				require.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, run)), "seed %d", seed)
				_, placed := sp.Attributes().Get(genai.AttrLSDottedOrder)
				parent, parentMapped := mapped[sp.ParentSpanID()]
				if !placed && (!parentMapped || parent.Head.DottedOrder != want[sp.ParentSpanID()]) {
					continue // an orphan, or under a parent that was itself one
				}
				require.Equal(t, want[sp.SpanID()], run.Head.DottedOrder, "seed %d span %d placed=%v", seed, sp.SpanID()[1], placed)
				require.NotContains(t, meta(t, run), keyOrphan, "seed %d", seed)
			}
			for i, run := range runs {
				mapped[bs.At(i).SpanID()] = run
			}
		}
		require.Len(t, mapped, n)
	}
}

// Two spans without a parent in one trace: the first, unplaced, became the root run (the
// trace id's run). A placed one that names that run as its own would collide with it
// (409, its run lost), so it is placed as a span without a placement: under the root.
func TestPlacedRootDoesNotTakeTheRunOfAnotherRoot(t *testing.T) {
	traceUUID := dottedorder.TraceUUID(pcommon.TraceID{9})
	m := NewMapper("p", 100)
	runs, _ := m.Map(placedSpan(1, 0, 0, ""))
	require.Equal(t, traceUUID, runs[0].Head.ID)
	runs, _ = m.Map(placedSpan(2, 0, time.Millisecond, string(dottedorder.AppendSegment(nil, base.Add(time.Millisecond).UnixMicro(), traceUUID))))
	require.Len(t, runs, 1)
	assert.NotEqual(t, traceUUID, runs[0].Head.ID)
	assert.Equal(t, traceUUID, runs[0].Head.ParentRunID)
	assert.Equal(t, OrphanAttachedToRoot, meta(t, runs[0])[keyOrphan])
}

// A span that names its LangSmith project (langsmith.trace.session_name, as LangSmith's
// OTel ingestion routes by it) goes to that project; the others to the exporter's. The
// attribute is not copied into metadata.
func TestRunGoesToTheProjectItsSpanNames(t *testing.T) {
	td := placedSpan(3, 0, 0, "")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr(genai.AttrLSSessionName, "caller-project")
	runs, _ := NewMapper("p", 100).Map(td)
	require.Len(t, runs, 1)
	assert.Equal(t, "caller-project", runs[0].Head.SessionName)
	assert.NotContains(t, meta(t, runs[0]), genai.AttrLSSessionName)
	runs, _ = NewMapper("p", 100).Map(placedSpan(3, 0, 0, ""))
	assert.Equal(t, "p", runs[0].Head.SessionName)
}

// langsmith.metadata.<key> is metadata <key>, as LangSmith's OTel ingestion reads it,
// unless the exporter writes <key> itself or the span has an attribute named <key>.
func TestLangSmithMetadataAttributesAreMetadataKeys(t *testing.T) {
	td := placedSpan(3, 0, 0, "")
	attrs := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	attrs.PutStr(genai.AttrLSMetadataPrefix+"customer", "acme")
	attrs.PutInt(genai.AttrLSMetadataPrefix+"tier", 2)
	attrs.PutStr(genai.AttrLSMetadataPrefix+"otel.span_id", "forged") // the exporter's own key
	attrs.PutStr("region", "eu")
	attrs.PutStr(genai.AttrLSMetadataPrefix+"region", "us") // the plain attribute is kept
	attrs.PutStr(genai.AttrLSMetadataPrefix, "no key")
	runs, _ := NewMapper("p", 100).Map(td)
	require.Len(t, runs, 1)
	body := string(runs[0].Extra.AppendJSON(nil))
	var extra struct {
		Metadata map[string]any `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &extra), body)
	md := extra.Metadata
	assert.Equal(t, "acme", md["customer"])
	assert.EqualValues(t, 2, md["tier"])
	assert.Equal(t, "eu", md["region"])
	assert.NotEqual(t, "forged", md["otel.span_id"])
	assert.Equal(t, "no key", md[genai.AttrLSMetadataPrefix])
	for k := range md {
		assert.NotContains(t, []string{genai.AttrLSMetadataPrefix + "customer", genai.AttrLSMetadataPrefix + "tier",
			genai.AttrLSMetadataPrefix + "otel.span_id", genai.AttrLSMetadataPrefix + "region"}, k)
	}
	// one key each: the body has no member twice
	assert.Equal(t, 1, strings.Count(body, `"otel.span_id":`), body)
	assert.Equal(t, 1, strings.Count(body, `"region":`), body)
}
