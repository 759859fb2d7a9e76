package faulty

import (
	"context"
	"sync"
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// Batcher sends the way an OTel SDK's BatchSpanProcessor in front of a retrying OTLP
// exporter does: the application ends runs at a steady rate whatever the collector
// answers, and one export loop sends what has piled up, at most MaxRuns runs per
// request, as soon as that many are waiting or Delay has passed since the last export.
// A refused request is resent (Load.SendRetrying, with the Load's backoff) while newer
// runs wait for the next request; unlike an SDK's bounded queue nothing waiting is
// dropped, so every run ended is sent once the collector takes data again.
type Batcher struct {
	Load          *Load
	RunsPerSecond float64       // the application's rate (3 spans per run)
	MaxRuns       int           // runs per request at most (0: 170, a BatchSpanProcessor's 512 spans)
	Delay         time.Duration // the longest a run waits for a fuller batch (0: 5 s, the SDK's default)
	FirstRun      int           // the number of the first run (its thread and run ids): distinct per Batcher
	// Answered puts finish reasons on each run's model calls, as the GenAI
	// instrumentations record them: the run says it has answered, so a hold-mode merge
	// releases its trace in the request that completes it rather than after settle_time.
	Answered bool

	mu      sync.Mutex
	ended   int // runs the application ended
	waiting int // of those, runs not yet in a request
	seq     int
	wake    chan struct{}
}

// BatcherStats are the application's side of a Batcher.
type BatcherStats struct {
	Ended   int // runs ended
	Waiting int // runs not yet in a request
}

// Stats returns how many runs were ended and how many still wait.
func (b *Batcher) Stats() BatcherStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatcherStats{Ended: b.ended, Waiting: b.waiting}
}

// Run ends runs at RunsPerSecond until ctx ends, then exports what still waits; stop
// ends the export at once (a request being refused then is abandoned: it was never
// accepted, so it is not counted as sent).
func (b *Batcher) Run(ctx, stop context.Context) {
	b.Load.init()
	if b.Delay == 0 {
		b.Delay = 5 * time.Second
	}
	if b.MaxRuns == 0 {
		b.MaxRuns = 170
	}
	b.wake = make(chan struct{}, 1)
	produced := make(chan struct{})
	go func() { defer close(produced); b.produce(ctx) }()
	b.export(ctx, stop, produced)
}

// produce ends runs at the rate, in 10 ms steps, until ctx ends.
func (b *Batcher) produce(ctx context.Context) {
	const step = 10 * time.Millisecond
	tick := time.NewTicker(step)
	defer tick.Stop()
	began := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(began).Seconds() * b.RunsPerSecond)
		b.mu.Lock()
		n := due - b.ended
		b.ended += n
		b.waiting += n
		full := b.waiting >= b.MaxRuns
		b.mu.Unlock()
		if full {
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
	}
}

// export sends batches until production ended and nothing waits, or stop ends.
func (b *Batcher) export(ctx, stop context.Context, produced <-chan struct{}) {
	for {
		n := b.batchSize()
		if n == b.MaxRuns || (n > 0 && ctx.Err() != nil) {
			b.send(stop, n)
			if stop.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-produced:
			if n == 0 {
				b.mu.Lock()
				left := b.waiting
				b.mu.Unlock()
				if left == 0 {
					return
				}
			}
		case <-stop.Done():
			return
		case <-b.wake:
		case <-time.After(b.Delay):
			if n := b.batchSize(); n > 0 { // what waits now, not when the wait began
				b.send(stop, n)
			}
		}
	}
}

// batchSize is how many waiting runs the next request takes.
func (b *Batcher) batchSize() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return min(b.waiting, b.MaxRuns)
}

// send builds a request of n waiting runs and sends it until it is accepted.
func (b *Batcher) send(stop context.Context, n int) {
	td, spans := newRequest()
	b.mu.Lock()
	first := b.FirstRun + b.seq
	b.seq += n
	b.mu.Unlock()
	now := time.Now()
	for i := range n {
		AppendRun(spans, first+i, now, "")
	}
	if b.Answered {
		for i := 0; i < spans.Len(); i++ {
			if sp := spans.At(i); genai.IsModelCallSpan(sp.Name(), sp.Attributes()) {
				genai.PutStrings(sp.Attributes(), genai.AttrFinishReasons, []string{"stop"})
			}
		}
	}
	if b.Load.SendRetrying(stop, td) {
		b.mu.Lock()
		b.waiting -= n
		b.mu.Unlock()
	}
}
