package ids

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
