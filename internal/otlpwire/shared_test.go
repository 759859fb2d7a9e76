package otlpwire

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func same(a, b []byte) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }

// A read-only batch is encoded once for the consumers of one call; anything else is
// encoded by each caller, as MarshalTraces would.
func TestEncodeShared(t *testing.T) {
	m := &ptrace.ProtoMarshaler{}
	td := randomTraces(rand.New(rand.NewPCG(1, 1)))
	want, err := m.MarshalTraces(td)
	require.NoError(t, err)

	ctx, done := WithShared(context.Background())
	mutable1, err := Encode(ctx, m, td)
	require.NoError(t, err)
	mutable2, err := Encode(ctx, m, td)
	require.NoError(t, err)
	assert.Equal(t, want, mutable1)
	assert.False(t, same(mutable1, mutable2), "a batch that may change is not shared")

	td.MarkReadOnly()
	first, err := Encode(ctx, m, td)
	require.NoError(t, err)
	second, err := Encode(ctx, m, td)
	require.NoError(t, err)
	assert.Equal(t, want, first)
	assert.True(t, same(first, second), "encoded once for the call")

	other := ptrace.NewTraces()
	td.CopyTo(other)
	other.MarkReadOnly()
	third, err := Encode(ctx, m, other)
	require.NoError(t, err)
	assert.Equal(t, want, third)
	assert.False(t, same(first, third), "another batch is encoded for itself")

	done()
	after, err := Encode(ctx, m, td)
	require.NoError(t, err)
	assert.False(t, same(first, after), "let go once the call is done")

	plain1, err := Encode(context.Background(), m, td)
	require.NoError(t, err)
	plain2, err := Encode(context.Background(), m, td)
	require.NoError(t, err)
	assert.False(t, same(plain1, plain2), "no Shared in the context: nothing shared")
}
