package spanutil

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTraceIDKeepsUUIDAndHexBytes(t *testing.T) {
	assert.Equal(t, "01a22a31cdc670008000016bd484a2ba", TraceID("01a22a31-cdc6-7000-8000-016bd484a2ba").String())
	assert.Equal(t, "0af7651916cd43dd8448eb211c80319c", TraceID("0af7651916cd43dd8448eb211c80319c").String())
	a, b := TraceID("trace-1"), TraceID("trace-1")
	assert.Equal(t, a, b)
	assert.NotEqual(t, TraceID("trace-2"), a)
	assert.False(t, TraceID("00000000000000000000000000000000").IsEmpty(), "an all-zero id is hashed, never kept")
	assert.NotEqual(t, SpanID("a", "x"), SpanID("b", "x"))
	assert.Equal(t, SpanID("a", "x"), SpanID("a", "x"))
}

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 11, 30, 2, 3, 56, 742001000, time.UTC)
	for _, v := range []any{
		"2026-11-30T02:03:56.742001Z",
		"2026-11-30T03:03:56.742001+01:00",
		"2026-11-30T02:03:56.742001", // Python isoformat, no offset
		json.Number("1796004236742001"),
	} {
		got, err := ParseTime(v)
		require.NoError(t, err, v)
		assert.True(t, want.Equal(got), "%v → %v", v, got)
	}
	ms, err := ParseTime(float64(1796004236742))
	require.NoError(t, err)
	assert.Equal(t, want.Truncate(time.Millisecond), ms)
	s, err := ParseTime(json.Number("1796004236"))
	require.NoError(t, err)
	assert.Equal(t, want.Truncate(time.Second), s)
	for _, bad := range []any{"noon", true, nil, float64(-1), map[string]any{}} {
		_, err := ParseTime(bad)
		assert.ErrorIs(t, err, ErrBadTime, "%v", bad)
	}
}

func TestToolCallIDs(t *testing.T) {
	var v any
	require.NoError(t, json.Unmarshal([]byte(`{"generations":[[{"message":{"kwargs":{"tool_calls":[{"id":"a"},{"id":"b"}],
	 "additional_kwargs":{"tool_calls":[{"id":"a"}]}}}}]],
	 "content":[{"type":"tool_use","id":"toolu_1"},{"type":"function_call","id":"fc","call_id":"call_r"}]}`), &v))
	assert.Equal(t, []string{"toolu_1", "call_r", "a", "b"}, ToolCallIDs(v))
	assert.Empty(t, ToolCallIDs(nil))
}

func TestCallerFromTagsAndErrorType(t *testing.T) {
	assert.Equal(t, "subagent:bash", CallerFromTags([]string{"seq:step:1", "subagent:bash", "lead_agent"}))
	assert.Equal(t, "", CallerFromTags([]string{"x"}))
	assert.Equal(t, "ValueError", ErrorType("ValueError('boom')"))
	assert.Equal(t, "TimeoutError", ErrorType("TimeoutError: slow"))
	assert.Equal(t, "_OTHER", ErrorType("something went wrong"))
	assert.Equal(t, "_OTHER", ErrorType(""))
	assert.Equal(t, "ab", Truncate("abé", 3))
}

func TestPendingAndRecent(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := NewPending[int](time.Minute, 2)
	assert.Empty(t, p.Put("a", 1, t0))
	assert.Empty(t, p.Put("b", 2, t0.Add(time.Second)))
	assert.Empty(t, p.Put("a", 3, t0.Add(2*time.Second)), "an update keeps its place")
	v, _ := p.Get("a")
	assert.Equal(t, 3, v)
	assert.Equal(t, []int{3}, p.Put("c", 4, t0.Add(3*time.Second)), "full: the oldest is handed back")
	assert.Equal(t, []int{2}, p.Expired(t0.Add(61*time.Second)))
	assert.Equal(t, []int{4}, p.Select(func(v int) bool { return v == 4 }))
	p.Remove("c")
	assert.Equal(t, 0, p.Len())

	r := NewRecent[string](2)
	r.Put("a", "1")
	r.Put("b", "2")
	r.Put("c", "3")
	_, ok := r.Get("a")
	assert.False(t, ok)
	v2, _ := r.Get("c")
	assert.Equal(t, "3", v2)
}
