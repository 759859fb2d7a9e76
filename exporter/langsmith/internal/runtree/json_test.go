package runtree

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestAppendValueMatchesAsRaw(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("s", "x\"y")
	m.PutInt("i", -42)
	m.PutDouble("d", 1.5)
	m.PutBool("b", true)
	m.PutEmptyBytes("by").FromRaw([]byte{1, 2, 3})
	sl := m.PutEmptySlice("sl")
	sl.AppendEmpty().SetStr("a")
	sl.AppendEmpty().SetInt(2)
	inner := m.PutEmptyMap("m")
	inner.PutStr("k", "v")
	inner.PutEmptySlice("empty")
	m.PutEmpty("nil")
	v := pcommon.NewValueMap()
	m.CopyTo(v.Map())
	got := appendValue(nil, v)
	var gotAny, wantAny any
	require.NoError(t, json.Unmarshal(got, &gotAny), string(got))
	want, err := json.Marshal(v.AsRaw())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(want, &wantAny))
	assert.Equal(t, wantAny, gotAny)

	nan := appendValue(nil, pcommon.NewValueDouble(math.Inf(1)))
	assert.Equal(t, `"+Inf"`, string(nan), "non-finite numbers are not JSON; sent as strings")
}

// A span attribute named like a derived key does not produce a duplicate JSON key.
func TestDerivedKeysWin(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{1})
	sp.Attributes().PutStr("thread_id", "from-attribute")
	sp.Attributes().PutStr("gen_ai.conversation.id", "t-1")
	sp.Attributes().PutStr("usage_metadata", `{"input_tokens":1}`)
	runs, _ := NewMapper("p", 1).Map(td)
	md := runs[0].Extra.Metadata
	n := 0
	for _, kv := range md {
		if kv.Key == "thread_id" {
			n++
		}
		assert.NotEqual(t, "usage_metadata", kv.Key)
	}
	assert.Equal(t, 1, n)
	v, _ := md.Get("thread_id")
	assert.Equal(t, "t-1", v)
}
