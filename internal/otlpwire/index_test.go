package otlpwire

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// randomTraces makes a batch of several resources and scopes (some empty, some with a
// schema URL or dropped counts), spans with events, links and attributes of every kind.
func randomTraces(r *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	for range r.IntN(4) + 1 {
		rs := td.ResourceSpans().AppendEmpty()
		if r.IntN(2) == 0 {
			rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		}
		rs.Resource().Attributes().PutStr("service.name", "svc")
		rs.Resource().Attributes().PutInt("n", r.Int64())
		rs.Resource().SetDroppedAttributesCount(uint32(r.IntN(2)))
		for range r.IntN(4) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("scope")
			ss.Scope().SetVersion([]string{"", "1.0"}[r.IntN(2)])
			if r.IntN(3) == 0 {
				ss.SetSchemaUrl("https://example.com/s")
			}
			for range r.IntN(5) {
				sp := ss.Spans().AppendEmpty()
				var tid [16]byte
				var sid [8]byte
				tid[0], sid[0] = byte(r.IntN(3)+1), byte(r.IntN(200)+1)
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				sp.SetName("chat model")
				sp.SetStartTimestamp(pcommon.Timestamp(r.Uint64() >> 1))
				a := sp.Attributes()
				a.PutStr("gen_ai.operation.name", "chat")
				a.PutInt("gen_ai.usage.input_tokens", r.Int64N(1e6))
				a.PutDouble("cost", r.Float64())
				a.PutBool("b", true)
				a.PutEmptySlice("s").AppendEmpty().SetStr("x")
				a.PutEmptyMap("m").PutStr("k", "v")
				if r.IntN(2) == 0 {
					sp.Events().AppendEmpty().SetName("event")
					sp.Links().AppendEmpty().SetTraceID(tid)
				}
				sp.Status().SetCode(ptrace.StatusCodeOk)
			}
		}
	}
	return td
}

// want builds what Append must give for idx: the chosen spans, copied under copies of
// their resource and scope, one ResourceSpans per run from the same resource and one
// ScopeSpans per run from the same scope.
func want(td ptrace.Traces, idx []int32) ptrace.Traces {
	type at struct{ rs, ss, sp int }
	var all []at
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		for j := 0; j < td.ResourceSpans().At(i).ScopeSpans().Len(); j++ {
			for k := 0; k < td.ResourceSpans().At(i).ScopeSpans().At(j).Spans().Len(); k++ {
				all = append(all, at{i, j, k})
			}
		}
	}
	out := ptrace.NewTraces()
	lastRS, lastSS := -1, -1
	var crs ptrace.ResourceSpans
	var css ptrace.ScopeSpans
	for _, n := range idx {
		a := all[n]
		src := td.ResourceSpans().At(a.rs)
		if a.rs != lastRS {
			crs = out.ResourceSpans().AppendEmpty()
			src.Resource().CopyTo(crs.Resource())
			crs.SetSchemaUrl(src.SchemaUrl())
			lastRS, lastSS = a.rs, -1
		}
		if a.ss != lastSS {
			css = crs.ScopeSpans().AppendEmpty()
			src.ScopeSpans().At(a.ss).Scope().CopyTo(css.Scope())
			css.SetSchemaUrl(src.ScopeSpans().At(a.ss).SchemaUrl())
			lastSS = a.ss
		}
		src.ScopeSpans().At(a.ss).Spans().At(a.sp).CopyTo(css.Spans().AppendEmpty())
	}
	return out
}

// Every selection of every random batch assembles into the encoding of a copy of the
// selection, and two selections concatenated decode as both.
func TestAppendIsTheEncodingOfTheSelection(t *testing.T) {
	var m ptrace.ProtoMarshaler
	var u ptrace.ProtoUnmarshaler
	var x Index
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		td := randomTraces(r)
		buf, err := m.MarshalTraces(td)
		require.NoError(t, err)
		require.NoError(t, x.Reset(buf))
		require.Equal(t, td.SpanCount(), x.Len())
		for range 5 {
			var idx []int32
			for i := range x.Len() {
				if r.IntN(3) > 0 {
					idx = append(idx, int32(i))
				}
			}
			w := want(td, idx)
			wb, err := m.MarshalTraces(w)
			require.NoError(t, err)
			got := x.Append([]byte("prefix"), idx)
			require.Equal(t, x.Size(idx), len(got)-len("prefix"))
			dec, err := u.UnmarshalTraces(got[len("prefix"):])
			require.NoError(t, err)
			assert.Equal(t, len(idx), dec.SpanCount())
			// the same message, its fields perhaps in another order
			db, err := m.MarshalTraces(dec)
			require.NoError(t, err)
			require.Equal(t, wb, db, "seed %d", seed)
		}
		a, b := []int32{0}, []int32{int32(x.Len() - 1)}
		if x.Len() > 0 {
			both, err := u.UnmarshalTraces(x.Append(x.Append(nil, a), b))
			require.NoError(t, err)
			w := want(td, a)
			want(td, b).ResourceSpans().MoveAndAppendTo(w.ResourceSpans())
			bb, err := m.MarshalTraces(both)
			require.NoError(t, err)
			wb, err := m.MarshalTraces(w)
			require.NoError(t, err)
			require.Equal(t, wb, bb)
		}
		assert.Empty(t, x.Append(nil, nil))
	}
}

// A field of a resource or scope that this package does not know is carried as it is.
func TestUnknownFieldsAreKept(t *testing.T) {
	// TracesData{resource_spans: ResourceSpans{field 9: varint 5, scope_spans:
	// ScopeSpans{field 7: "x", spans: Span{name (5): "s"}}}}
	sp := []byte{0x2a, 0x01, 's'}
	ss := append([]byte{0x3a, 0x01, 'x', 0x12, byte(len(sp))}, sp...)
	rs := append([]byte{0x48, 0x05, 0x12, byte(len(ss))}, ss...)
	buf := append([]byte{0x0a, byte(len(rs))}, rs...)
	var x Index
	require.NoError(t, x.Reset(buf))
	require.Equal(t, 1, x.Len())
	assert.Equal(t, buf, x.Append(nil, []int32{0}))
}

// Bad bytes are an error naming where, never a panic.
func TestBadEncodingIsAnError(t *testing.T) {
	var m ptrace.ProtoMarshaler
	buf, err := m.MarshalTraces(randomTraces(rand.New(rand.NewPCG(1, 1))))
	require.NoError(t, err)
	var x Index
	for _, cut := range []int{1, 2, len(buf) / 2, len(buf) - 1} {
		if cut >= len(buf) {
			continue
		}
		err := x.Reset(buf[:cut])
		require.Error(t, err, "cut at %d", cut)
		assert.ErrorIs(t, err, ErrMalformed)
	}
}
