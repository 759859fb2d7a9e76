package model

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The timeout is per chunk: a stream that keeps sending chunks outlives it; one that
// stalls is cancelled with ErrStreamChunkTimeout.
func TestChunkWatchdog(t *testing.T) {
	ctx, w := ChunkWatchdog(context.Background(), 300*time.Millisecond)
	for range 8 { // 8 × 50 ms = 400 ms, past one timeout
		time.Sleep(50 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("cancelled while chunks kept coming")
		}
		w.Chunk()
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a stalled stream was never cancelled")
	}
	err := StreamError(ctx, context.Canceled, 300*time.Millisecond)
	if !errors.Is(err, ErrStreamChunkTimeout) || !errors.Is(err, context.Canceled) || err.Error() != "stream chunk timeout: no chunk for 300ms" {
		t.Fatalf("StreamError = %v", err)
	}
	w.Stop()
	ctx2, w2 := ChunkWatchdog(context.Background(), time.Hour)
	w2.Stop()
	if err := StreamError(ctx2, context.Canceled, time.Hour); errors.Is(err, ErrStreamChunkTimeout) {
		t.Fatal("a stopped watchdog reports a chunk timeout")
	}
}
