package otlpwire

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A batch the collector hands to several consumers at once is read-only: its fanout
// marks it so before the first of them is called, and pdata refuses every change to it
// from then on. So the encoding one of them makes of it is the batch's encoding for the
// others too. Behind the stream merge, the Langfuse exporter encodes each batch to splice
// Langfuse's attributes into, and LangSmith's gather encodes the same batch to cut out
// what it holds: with a Shared in the context, whichever comes first encodes it and the
// other reads those bytes.

type sharedKey struct{}

// Shared is the encoding of one read-only batch, for the consumers of one call.
type Shared struct {
	mu  sync.Mutex
	td  ptrace.Traces
	enc []byte
}

// WithShared returns ctx carrying a Shared for the consumers the caller hands a batch to
// next, and done, which lets go of the encoding once they returned.
func WithShared(ctx context.Context) (_ context.Context, done func()) {
	s := &Shared{}
	return context.WithValue(ctx, sharedKey{}, s), func() {
		s.mu.Lock()
		s.td, s.enc = ptrace.Traces{}, nil
		s.mu.Unlock()
	}
}

// Encode returns td encoded by m. When td is read-only and ctx carries a Shared, the
// encoding is made once for every consumer of the call and shared: the caller must not
// change the bytes.
func Encode(ctx context.Context, m *ptrace.ProtoMarshaler, td ptrace.Traces) ([]byte, error) {
	s, _ := ctx.Value(sharedKey{}).(*Shared)
	if s == nil || !td.IsReadOnly() {
		return m.MarshalTraces(td)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enc != nil && s.td == td {
		return s.enc, nil
	}
	enc, err := m.MarshalTraces(td)
	if err != nil {
		return nil, err
	}
	s.td, s.enc = td, enc
	return enc, nil
}
