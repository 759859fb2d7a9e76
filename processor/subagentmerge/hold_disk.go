package subagentmerge

// Hold and gather mode with storage: what a request writes before it is answered, and
// what passing traces on lets go of.

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// writeChunk writes what this request leaves buffered (with storage), before it is
// acknowledged.
func (p *subagentMerge) writeChunk(ctx context.Context, sc *scratch) error {
	held := p.heldChunk(sc)
	if held.data == nil {
		return nil
	}
	return p.heldWriteFailed(p.store.write(ctx, held.seq, held.data))
}

// heldChunk is the chunk of what this request leaves buffered, to be written (with
// storage) before it is acknowledged; its data is nil when there is none.
func (p *subagentMerge) heldChunk(sc *scratch) chunkWrite {
	if p.store == nil || len(sc.chunk) == 0 {
		return chunkWrite{}
	}
	return chunkWrite{seq: sc.chunkSeq, data: sc.chunk}
}

// heldWriteFailed says in the log that err (nil: none) kept a request's buffered spans
// off the disk, and returns the request's error.
func (p *subagentMerge) heldWriteFailed(err error) error {
	if err == nil {
		return nil
	}
	p.logger.Error("storage: writing buffered spans failed; refusing the request (retryable)", zap.Error(err))
	return fmt.Errorf("subagentmerge: storing buffered spans: %w", err)
}

// forgetOnDisk lets go of the stored chunks of traces the next consumer accepted
// (persister.forget: deleted, or marked where other traces still hold them).
func (p *subagentMerge) forgetOnDisk(ctx context.Context, holds []chunkHold, drop ...uint64) {
	if p.store == nil || len(holds)+len(drop) == 0 {
		return
	}
	if err := p.store.forget(ctx, holds, drop...); err != nil {
		// they go with the next batch that succeeds; a crash before it sends them again
		p.logger.Warn("storage: deleting the chunks of passed-on traces failed", zap.Error(err))
	}
}

// holdForEach holds stored chunk seq once for each trace td has spans of (spans without
// a trace id: once, for no trace), and appends the holds to dst: once td is passed on,
// each of its traces is marked gone from the chunk while buffered traces still hold it
// for their own spans in it (persist_ends.go), so a restart does not pass them on again.
func (p *subagentMerge) holdForEach(dst []chunkHold, td ptrace.Traces, seq uint64) []chunkHold {
	seen := map[pcommon.TraceID]struct{}{}
	for sp := range spaniter.All(td) {
		id := sp.TraceID()
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		p.store.ref(seq)
		dst = append(dst, chunkHold{id, seq})
	}
	return dst
}
