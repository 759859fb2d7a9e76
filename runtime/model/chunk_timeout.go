package model

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStreamChunkTimeout marks a streamed response that stalled between two chunks for
// longer than the model's timeout (DeerFlow's StreamChunkTimeoutError: the timeout is
// per chunk, so a long answer that keeps streaming is never cut). Providers wrap it;
// retry policy recognises it with errors.Is.
var ErrStreamChunkTimeout = errors.New("stream chunk timeout")

// ChunkWatchdog returns a context that is cancelled with cause ErrStreamChunkTimeout when
// Chunk is not called for d; stop releases it. d <= 0 disables the watchdog.
func ChunkWatchdog(ctx context.Context, d time.Duration) (context.Context, *Watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{cancel: cancel, d: d}
	if d > 0 {
		w.timer = time.AfterFunc(d, func() { cancel(ErrStreamChunkTimeout) })
	}
	return ctx, w
}

// Watchdog is a running ChunkWatchdog.
type Watchdog struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc
	timer  *time.Timer
	d      time.Duration
}

// Chunk records that a chunk arrived: the next one has d again.
func (w *Watchdog) Chunk() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Reset(w.d)
	}
}

// Stop ends the watchdog and cancels its context (nil cause).
func (w *Watchdog) Stop() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.cancel(nil)
}

// StreamError returns ErrStreamChunkTimeout (wrapped with the timeout) when ctx — a
// ChunkWatchdog context — ended because a chunk was late, else err.
func StreamError(ctx context.Context, err error, d time.Duration) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrStreamChunkTimeout) {
		return &chunkTimeoutError{d: d, err: err}
	}
	return err
}

type chunkTimeoutError struct {
	d   time.Duration
	err error
}

func (e *chunkTimeoutError) Error() string {
	return "stream chunk timeout: no chunk for " + e.d.String()
}

func (e *chunkTimeoutError) Unwrap() []error { return []error{ErrStreamChunkTimeout, e.err} }
