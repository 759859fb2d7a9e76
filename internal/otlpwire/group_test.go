package otlpwire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// repeatedTraces is what joining a trace's stored batches gives: resources and scopes
// that repeat (drawn from a few), some empty, spans of every kind under them.
func repeatedTraces(r *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	src := randomTraces(r)
	for range r.IntN(8) + 1 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", []string{"lead", "worker"}[r.IntN(2)])
		if r.IntN(3) == 0 {
			rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
		}
		for range r.IntN(3) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName([]string{"a", "b"}[r.IntN(2)])
			for range r.IntN(4) {
				from := src.ResourceSpans().At(0).ScopeSpans()
				if from.Len() == 0 || from.At(0).Spans().Len() == 0 {
					ss.Spans().AppendEmpty().SetName("plain")
					continue
				}
				from.At(0).Spans().At(r.IntN(from.At(0).Spans().Len())).CopyTo(ss.Spans().AppendEmpty())
			}
		}
	}
	return td
}

// grouped builds what AppendGrouped must give, with pdata: each distinct resource
// (with its schema URL) once, in the order the resources first come, under it each
// distinct scope once, and every span under its own, in order; nothing empty.
func grouped(t *testing.T, td ptrace.Traces) ptrace.Traces {
	key := func(rs ptrace.ResourceSpans, ss *ptrace.ScopeSpans) string {
		one := ptrace.NewTraces()
		c := one.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(c.Resource())
		c.SetSchemaUrl(rs.SchemaUrl())
		if ss != nil {
			cs := c.ScopeSpans().AppendEmpty()
			ss.Scope().CopyTo(cs.Scope())
			cs.SetSchemaUrl(ss.SchemaUrl())
		}
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(one)
		require.NoError(t, err)
		return string(b)
	}
	out := ptrace.NewTraces()
	res := map[string]ptrace.ResourceSpans{}
	scopes := map[string]ptrace.ScopeSpans{}
	for _, rs := range td.ResourceSpans().All() {
		rk := key(rs, nil)
		dst, ok := res[rk]
		if !ok {
			dst = out.ResourceSpans().AppendEmpty()
			rs.Resource().CopyTo(dst.Resource())
			dst.SetSchemaUrl(rs.SchemaUrl())
			res[rk] = dst
		}
		for _, ss := range rs.ScopeSpans().All() {
			sk := key(rs, &ss)
			dss, ok := scopes[sk]
			if !ok {
				dss = dst.ScopeSpans().AppendEmpty()
				ss.Scope().CopyTo(dss.Scope())
				dss.SetSchemaUrl(ss.SchemaUrl())
				scopes[sk] = dss
			}
			for _, sp := range ss.Spans().All() {
				sp.CopyTo(dss.Spans().AppendEmpty())
			}
		}
	}
	out.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool { return ss.Spans().Len() == 0 })
		return rs.ScopeSpans().Len() == 0
	})
	return out
}

func TestAppendGroupedProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var g Grouping
	var x Index
	for i := range 500 {
		td := repeatedTraces(r)
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		require.NoError(t, x.Reset(b))
		got, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(x.AppendGrouped(nil, &g))
		require.NoError(t, err, "case %d", i)
		wantJSON, err := (&ptrace.JSONMarshaler{}).MarshalTraces(grouped(t, td))
		require.NoError(t, err)
		gotJSON, err := (&ptrace.JSONMarshaler{}).MarshalTraces(got)
		require.NoError(t, err)
		require.JSONEq(t, string(wantJSON), string(gotJSON), "case %d", i)
		assert.Equal(t, td.SpanCount(), got.SpanCount())
	}
}

// Joined batches of one trace decode into one resource and scope.
func TestAppendGroupedJoinsBatches(t *testing.T) {
	var joined []byte
	for i := range 5 {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "deer-flow")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("agentmeter/runtime")
		for j := range 3 {
			ss.Spans().AppendEmpty().SetName(string(rune('a'+i)) + string(rune('0'+j)))
		}
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		joined = append(joined, b...)
	}
	var x Index
	require.NoError(t, x.Reset(joined))
	out := x.AppendGrouped(nil, &Grouping{})
	assert.Less(t, len(out), len(joined))
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(out)
	require.NoError(t, err)
	require.Equal(t, 1, td.ResourceSpans().Len())
	require.Equal(t, 1, td.ResourceSpans().At(0).ScopeSpans().Len())
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	require.Equal(t, 15, spans.Len())
	var names bytes.Buffer
	for _, sp := range spans.All() {
		names.WriteString(sp.Name() + " ")
	}
	assert.Equal(t, "a0 a1 a2 b0 b1 b2 c0 c1 c2 d0 d1 d2 e0 e1 e2 ", names.String())
}
