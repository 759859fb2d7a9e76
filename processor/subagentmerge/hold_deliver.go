package subagentmerge

// Gather mode with delivery: queued: the processor is the sending queue of the exporter
// after it.
//
// Inline delivery hands a released trace to the next consumer in the call that released
// it. In front of an exporter with a persistent sending queue that costs the spans a
// second round through storage: the gather decodes the chunks it stored, the queue
// encodes the spans again, stores them, reads them back and decodes them once more. With
// queued delivery the gather's own storage is the queue: a released trace's chunks stay on
// disk, as they are, until the next consumer took the trace; its goroutine decodes them
// once, right before sending. What a request brings that is not held (the rest of the
// traces it completes, late spans, corrections) is stored as a chunk of its own before
// the request is answered, as an exporter's queue would. It reuses the unsent queue
// (hold_unsent.go): its order, its bound, and its chunks kept until delivered, so a
// restart sends again what was not taken.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// deliverLanes is how many goroutines send at once. A trace always goes by the same
// lane (by its id), in order: a run's later versions never overtake its first one. More
// than one, because a sender is one goroutine among the pipeline's many: on a busy
// machine one alone fell behind the requests and its queue filled (an exporter's
// sending queue has 10 consumers for the same reason).
const deliverLanes = 4

// deliverer is queued delivery's goroutines, one a lane, each woken when a batch is
// queued on its lane and when a refused one is due again.
type deliverer struct {
	queues []*unsent
	wake   []chan struct{}
	done   sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newDeliverer(queued bool) *deliverer {
	ctx, cancel := context.WithCancel(context.Background())
	d := &deliverer{ctx: ctx, cancel: cancel}
	if queued {
		for range deliverLanes {
			d.queues = append(d.queues, &unsent{})
			d.wake = append(d.wake, make(chan struct{}, 1))
		}
	}
	return d
}

func (d *deliverer) poke(lane int) {
	select {
	case d.wake[lane] <- struct{}{}:
	default:
	}
}

// laneOf is the lane trace id goes by.
func laneOf(id pcommon.TraceID) int { return int(id[15]) % deliverLanes }

// encodedRest is one lane's spans of a call that go on now, encoded, and their traces.
type encodedRest struct {
	enc    []byte
	spans  int
	traces []pcommon.TraceID
}

// queuedOut is what a call queues (enqueue): the released traces raw (their stored
// chunks, not decoded: gather mode encodes what it holds on arrival, so it holds no
// pdata; each batch holds its traces' chunks until delivered) and the slots of the
// traces the call released (landings), then rest, the call's spans going on now, encoded by lane, and
// follows, those of traces released before, each in its trace's slot (landing.go).
// rest and follows are of stored chunk restSeq, or, when restSeq < 0, stored first as a
// chunk of their own. versions says some span may be in it more than once (the sender
// coalesces them).
type queuedOut struct {
	rest     [deliverLanes]encodedRest
	follows  []encodedFollow
	raw      []held
	landings []landingOf
	restSeq  int64
	versions bool
}

// storeChunks are enqueue's buffers for the chunk it stores: the spans a call queues
// are held in memory in their lane batches already, so the joined copy is needed only
// while it is written.
var storeChunks = sync.Pool{New: func() any { return new([]byte) }}

// enqueue queues q on each trace's lane; what q stores is on disk before the request is
// answered, written in the transaction of held, what the request buffers (held.data nil:
// nothing). Then the slots of q's traces are filled (landing.go).
func (p *subagentMerge) enqueue(ctx context.Context, q queuedOut, held chunkWrite) error {
	var batches [deliverLanes]unsentBatch
	for _, h := range q.raw {
		b := &batches[laneOf(h.id)]
		b.spans += h.spans
		b.parts = append(b.parts, h.chunks...)
		b.seqs = holdsOf(b.seqs, h)
		b.keepFirst = b.keepFirst || h.restored
	}
	var chunk []byte // what goes on disk: a pooled buffer, the persister copies what it keeps
	store := q.restSeq < 0 && p.store != nil
	if store {
		bp := storeChunks.Get().(*[]byte)
		chunk = (*bp)[:0]
		defer func() {
			if cap(chunk) <= maxPooledBytes {
				*bp = chunk[:0]
				storeChunks.Put(bp)
			}
		}()
	}
	for lane, r := range q.rest {
		if r.spans == 0 {
			continue
		}
		b := &batches[lane]
		b.enc, b.spans = r.enc, b.spans+r.spans
		b.keepFirst = b.keepFirst || q.restSeq >= 0 // read back at start
		if store {
			chunk = append(chunk, r.enc...) // one chunk for all lanes: they decode as one
		}
	}
	follows := make([]unsentBatch, len(q.follows))
	for i, f := range q.follows {
		follows[i] = unsentBatch{enc: f.enc, spans: f.spans, versions: q.versions, keepFirst: q.restSeq >= 0}
		if store && f.spans > 0 {
			chunk = append(chunk, f.enc...)
		}
	}
	var err error
	seq := q.restSeq
	if len(chunk) > 0 {
		seq = int64(p.store.draw())
	}
	if seq >= 0 && p.store != nil {
		// each lane's batch with spans of rest holds its chunk until delivered, once for
		// each trace, so a lane delivered before the others is marked gone from it
		// (persist_ends.go): a chunk of its own, or one read back at start (buffered
		// traces may hold it too, for their own spans in it: a trace's spans of one
		// request are all held or all go on)
		for i := range batches {
			if batches[i].enc == nil {
				continue
			}
			ids := q.rest[i].traces
			if len(ids) == 0 {
				ids = []pcommon.TraceID{{}} // spans without a trace id
			}
			for _, id := range ids {
				p.store.ref(uint64(seq))
				batches[i].seqs = append(batches[i].seqs, chunkHold{id, uint64(seq)})
			}
		}
		for i, f := range q.follows {
			if f.spans > 0 {
				p.store.ref(uint64(seq))
				follows[i].seqs = []chunkHold{{f.id, uint64(seq)}}
			}
		}
	}
	if len(chunk) > 0 || held.data != nil {
		// a failed write is retried with the next one (persister.write), so the chunk
		// is the batches' either way
		writes := []chunkWrite{held}
		if len(chunk) > 0 {
			writes = append(writes, chunkWrite{seq: uint64(seq), data: chunk})
		}
		if werr := p.store.writeForgetting(ctx, writes, nil); werr != nil {
			if len(chunk) > 0 {
				err = fmt.Errorf("subagentmerge: storing spans to send: %w", werr)
			}
			if held.data != nil {
				err = errors.Join(err, p.heldWriteFailed(werr))
			}
		}
	}
	for lane := range batches {
		if b := batches[lane]; b.enc != nil || len(b.parts) > 0 {
			b.versions = q.versions
			p.deliver.queues[lane].push(b)
			p.deliver.poke(lane)
		}
	}
	// then the traces' slots, in the order placed: the releases this call queued above,
	// and its spans of traces released before (landing.go)
	for _, h := range q.raw {
		p.fill(h.id, h.slot, nil)
	}
	for _, lo := range q.landings {
		p.fill(lo.id, lo.s, nil)
	}
	for i, f := range q.follows {
		if f.spans == 0 {
			p.fill(f.id, f.s, nil) // nothing to send (its encoding failed: said in the error)
			continue
		}
		p.fill(f.id, f.s, &follows[i])
	}
	return err
}

// startDeliver starts queued delivery's goroutines.
func (p *subagentMerge) startDeliver() {
	for lane := range p.deliver.queues {
		p.deliver.done.Add(1)
		go p.deliverLoop(lane)
	}
}

// stopDeliver stops them: a send under way is cancelled (it is sent again at shutdown or
// after a restart).
func (p *subagentMerge) stopDeliver() {
	p.deliver.cancel()
	p.deliver.done.Wait()
}

func (p *subagentMerge) deliverLoop(lane int) {
	defer p.deliver.done.Done()
	u, ctx := p.deliver.queues[lane], p.deliver.ctx
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.drainQueue(ctx, u, p.now())
		wait := time.Hour
		if at := u.retryAt.Load(); at > 0 {
			wait = max(time.Duration(at-p.now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-p.deliver.wake[lane]:
		case <-timer.C:
		}
		// no draining: since Go 1.23 Reset discards a value the timer sent before it
	}
}
