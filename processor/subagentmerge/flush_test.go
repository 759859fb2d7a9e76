package subagentmerge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/storagetest"
)

// noTrace is td's local root alone, with no trace id: passed on as it is in every mode,
// writing nothing of its own.
func noTrace(td ptrace.Traces) ptrace.Traces {
	out := clone(rootOf(td))
	out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(pcommon.TraceID{})
	return out
}

// A chunk a failed write left waits, and the disk still fails. A request that writes
// nothing and acknowledges nothing it did not write (no duplicates) is answered as
// usual: refusing it after its spans went on would have every retry of the sender pass
// them on again.
func TestRequestOfNewSpansIsNotRefusedForAnEarlierFailedWrite(t *testing.T) {
	for name, cfg := range map[string]func() *Config{"hold": defaultTestConfig, "gather": gatherTestConfig, "stream": streamTestConfig} {
		st := storagetest.New()
		p, sink := startWithStorage(t, st, cfg())
		ctx := context.Background()
		st.Fail(errors.New("disk full"))
		require.Error(t, p.ConsumeTraces(ctx, withoutRoot(oneTaskN(1))), "%s: refused, its write failed", name)
		n := noTrace(oneTaskN(2))
		require.NoError(t, p.ConsumeTraces(ctx, clone(n)), "%s: nothing of it waits on the disk", name)
		got := spanCounts(sink.AllTraces())
		for id := range spanIDSet(n) {
			assert.Equal(t, 1, got[id], "%s: span %s passed on once", name, id)
		}
		st.Fail(nil)
		kill(p)
	}
}

// A request with nothing to write, while nothing waits from a failed write, does not
// wait for another request's storage transaction (a slow disk).
func TestRequestWithNothingToWriteDoesNotWaitForTheDisk(t *testing.T) {
	st := storagetest.New()
	p, _ := startWithStorage(t, st, defaultTestConfig())
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	st.SetOnBatch(func(ops []*storage.Operation) {
		for _, op := range ops {
			if strings.HasPrefix(op.Key, "chunk/") {
				once.Do(func() { close(entered); <-release }) // a slow write
				return
			}
		}
	})
	slow := make(chan error, 1)
	go func() { slow <- p.ConsumeTraces(ctx, withoutRoot(oneTaskN(1))) }()
	<-entered
	quick := make(chan error, 1)
	go func() { quick <- p.ConsumeTraces(ctx, oneTaskN(2)) }() // complete: writes nothing
	select {
	case err := <-quick:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Error("a request with nothing to write waited for another request's storage transaction")
	}
	close(release)
	require.NoError(t, <-slow)
	st.SetOnBatch(nil)
	require.NoError(t, p.Shutdown(ctx))
}
