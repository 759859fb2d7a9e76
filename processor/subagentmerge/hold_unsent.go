package subagentmerge

// Hold mode: what the next consumer refuses after it has left the buffer.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// maxUnsentBytes bounds what waits in the unsent queue, held encoded (protobuf). Past it
// the processor refuses new spans at once, retryably, until the queue drains: an outage
// downstream pushes back on the senders instead of growing the heap.
const maxUnsentBytes = 32 << 20

// shutdownSendTimeout bounds queued delivery's last sends at shutdown; what is left
// stays on disk (with storage) for the next start.
var shutdownSendTimeout = 5 * time.Second // tests shorten it

// Retries of the unsent queue's head back off from minUnsentBackoff to maxUnsentBackoff.
const (
	minUnsentBackoff = 100 * time.Millisecond
	maxUnsentBackoff = 5 * time.Second
)

// unsentBatch is one refused batch (with queued delivery, every batch a call released,
// hold_deliver.go): released traces (merged), their late spans and
// corrections, and the spans passed on with them. seqs are the stored chunks it came
// from (and the one it was written to, when it held spans not on disk yet); they stay
// on disk until the batch is delivered, so a restart sends it again: whole, also the
// part a partial refusal said was taken (duplicates, which the vendors upsert or keep
// the first of).
type unsentBatch struct {
	enc []byte // ptrace.ProtoMarshaler's encoding, decoded for each attempt
	// more encodings that follow enc (queued delivery: a released trace's chunks as
	// they were stored, not copied into one)
	parts     [][]byte
	seqs      []chunkHold
	spans     int
	versions  bool // some span may be in it more than once (queued delivery coalesces)
	keepFirst bool // read back at start: coalesced keeping first emissions (coalesce)
}

// size is the bytes b holds.
func (b *unsentBatch) size() int64 {
	n := len(b.enc)
	for _, p := range b.parts {
		n += len(p)
	}
	return int64(n)
}

// unsent is the queue of refused batches, sent again in order by the sweeper and ahead
// of anything released later (queued delivery has one a lane, sent by the lane's
// goroutine: hold_deliver.go). A released trace was acknowledged when it was buffered,
// and its spans are no longer in the buffer: handing the refusal back to the sender
// would lose them (a retry of the same request finds its trace released and drops its
// spans as duplicates).
type unsent struct {
	mu      sync.Mutex // guards items
	items   []unsentBatch
	sending sync.Mutex // held by the one goroutine sending the head
	n       atomic.Int64
	spans   atomic.Int64
	bytes   atomic.Int64
	retryAt atomic.Int64 // unix nanos before which the head is not sent again
	backoff time.Duration
	errMu   sync.Mutex
	lastErr error // the last refusal, for the shutdown report
}

func (u *unsent) refused(err error) {
	u.errMu.Lock()
	u.lastErr = err
	u.errMu.Unlock()
}

func (u *unsent) push(b unsentBatch) {
	u.mu.Lock()
	u.items = append(u.items, b)
	u.mu.Unlock()
	u.n.Add(1)
	u.spans.Add(int64(b.spans))
	u.bytes.Add(b.size())
}

// passOn hands td to the next consumer. When the consumer refuses it, or batches it
// refused earlier still wait, td joins the unsent queue (with storage, on disk first
// when it holds spans not stored yet: unstored) and passOn reports success: the spans
// are in this processor's keeping. It reports an error for a permanent refusal, or when
// writing td failed (it is kept in memory and written with the next write; the sender's
// retry is a duplicate).
//
// The queue itself is sent by the sweeper (and once more at shutdown), never by a
// request: a request waits at most once for room downstream (its own batch, bounded by
// the sending queue's wait), never for batches queued before it too, so its answer
// stays fast while the vendors are down.
func (p *subagentMerge) passOn(ctx context.Context, td ptrace.Traces, seqs []chunkHold, unstored bool) error {
	if p.unsent.n.Load() == 0 {
		err := p.next.ConsumeTraces(ctx, td)
		if err == nil {
			p.forgetOnDisk(ctx, seqs)
			return nil
		}
		if consumererror.IsPermanent(err) {
			// it can never be delivered: sending it again would block every later batch
			p.forgetOnDisk(ctx, seqs)
			return err
		}
		td, _ = notTaken(td, err)
		p.logger.Warn("the next consumer refused released traces; they wait in the unsent queue",
			zap.Int("spans", td.SpanCount()), zap.Error(err))
		p.unsent.refused(err)
	}
	enc, err := p.marshaler.MarshalTraces(td)
	if err != nil {
		// only pdata this process built: a bug, not bad input
		p.forgetOnDisk(ctx, seqs)
		return fmt.Errorf("subagentmerge: encoding refused spans: %w", err)
	}
	// seqs may be the caller's scratch, reused after this returns
	b := unsentBatch{enc: enc, seqs: slices.Clone(seqs), spans: td.SpanCount()}
	if unstored && p.store != nil {
		// a failed write is retried with the next one (persister.write), so the chunk
		// is the batch's either way
		seq := p.store.draw()
		p.store.ref(seq)
		b.seqs = append(b.seqs, chunkHold{seq: seq})
		if werr := p.store.write(ctx, seq, enc); werr != nil {
			err = fmt.Errorf("subagentmerge: storing refused spans: %w", werr)
		}
	}
	p.unsent.push(b)
	if p.unsent.retryAt.Load() == 0 {
		p.unsent.retryAt.Store(p.now() + int64(minUnsentBackoff))
	}
	return err
}

// drainUnsent drains every unsent queue (drainQueue): the one of inline delivery, or
// queued delivery's lanes.
func (p *subagentMerge) drainUnsent(ctx context.Context, now int64) {
	for _, u := range p.queues() {
		p.drainQueue(ctx, u, now)
	}
}

// queues are the unsent queues: inline delivery's one, or queued delivery's lanes.
func (p *subagentMerge) queues() []*unsent {
	if p.queued {
		return p.deliver.queues
	}
	return []*unsent{&p.unsent}
}

// drainQueue sends u's batches in order, several at a time (deliverHead), until one is
// refused, then backs off. One goroutine sends at a time; the others go on at once.
func (p *subagentMerge) drainQueue(ctx context.Context, u *unsent, now int64) {
	if u.n.Load() == 0 || now < u.retryAt.Load() || !u.sending.TryLock() {
		return
	}
	defer u.sending.Unlock()
	for {
		u.mu.Lock()
		if len(u.items) == 0 {
			u.mu.Unlock()
			u.backoff = 0
			u.retryAt.Store(0)
			return
		}
		u.mu.Unlock()
		if !p.deliverHead(ctx, u) {
			return
		}
	}
}

// maxDeliverSpans bounds one send from an unsent queue: the batches waiting behind one
// another go together up to it (the shipped exporters' largest batch).
const maxDeliverSpans = 2048

// nextDelivery decodes u's first batches, up to maxDeliverSpans (at least
// one), into one: how many it took and what to send. They are decoded together
// (decodeChunks: each resource and scope once); should that fail, each batch is decoded
// alone, and one that does not decode (only this process encoded it: a bug) is dropped,
// said in the log. Only the goroutine holding u.sending calls it.
func (p *subagentMerge) nextDelivery(ctx context.Context, u *unsent) (int, ptrace.Traces) {
	var parts [][]byte
	took, spans, versions, keep := 0, 0, false, false
	u.mu.Lock()
	for took < len(u.items) && (took == 0 || spans+u.items[took].spans <= maxDeliverSpans) {
		b := &u.items[took]
		parts = append(parts, b.parts...)
		if len(b.enc) > 0 {
			parts = append(parts, b.enc)
		}
		took, spans, versions, keep = took+1, spans+b.spans, versions || b.versions, keep || b.keepFirst
	}
	u.mu.Unlock()
	td, err := p.decodeChunks(parts, nil)
	if err != nil {
		return p.nextDeliveryEach(ctx, u)
	}
	if versions {
		coalesce(td, keep)
	}
	return took, td
}

// nextDeliveryEach is nextDelivery decoding each batch alone, so that one that does not
// decode is found and dropped.
func (p *subagentMerge) nextDeliveryEach(ctx context.Context, u *unsent) (int, ptrace.Traces) {
	td := ptrace.NewTraces()
	took, spans, versions, keep := 0, 0, false, false
	for {
		u.mu.Lock()
		if took == len(u.items) || (took > 0 && spans+u.items[took].spans > maxDeliverSpans) {
			u.mu.Unlock()
			break
		}
		b := u.items[took]
		u.mu.Unlock()
		one, err := p.decodeChunks(b.parts, b.enc)
		if err != nil {
			p.logger.Error("subagentmerge: a queued batch does not decode; dropped", zap.Int("spans", b.spans), zap.Error(err))
			p.dropHead(ctx, u, took, 1, false)
			continue
		}
		one.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		took, spans, versions, keep = took+1, spans+b.spans, versions || b.versions, keep || b.keepFirst
	}
	if versions {
		coalesce(td, keep)
	}
	return took, td
}

// dropHead takes n batches out of the unsent queue from index at, and their chunks off
// the disk; sent says the next consumer took them (forgetDelivered). Only the goroutine
// holding u.sending calls it.
func (p *subagentMerge) dropHead(ctx context.Context, u *unsent, at, n int, sent bool) {
	u.mu.Lock()
	gone := append([]unsentBatch(nil), u.items[at:at+n]...)
	was := len(u.items)
	u.items = append(u.items[:at], u.items[at+n:]...)
	clear(u.items[len(u.items):was]) // the slots past the end let go of the batches' bytes
	u.mu.Unlock()
	var seqs []chunkHold
	for _, b := range gone {
		u.n.Add(-1)
		u.spans.Add(-int64(b.spans))
		u.bytes.Add(-b.size())
		seqs = append(seqs, b.seqs...)
	}
	if sent {
		p.forgetDelivered(ctx, seqs) // one transaction for all
		return
	}
	p.forgetOnDisk(ctx, seqs)
}

// deliverHead sends u's first batches together (nextDelivery). It reports whether they
// were taken, or dropped for good; on a retryable refusal they stay, and what a partial
// refusal says was taken is taken out of them.
func (p *subagentMerge) deliverHead(ctx context.Context, u *unsent) bool {
	n, td := p.nextDelivery(ctx, u)
	if n == 0 {
		return true // what there was did not decode
	}
	err := p.next.ConsumeTraces(ctx, td)
	switch {
	case err == nil:
		p.dropHead(ctx, u, 0, n, true)
		return true
	case consumererror.IsPermanent(err) && n > 1:
		// one batch's spans may be what it refuses: each goes alone, so that the
		// others' are not dropped with them
		return p.deliverAlone(ctx, u, n)
	case consumererror.IsPermanent(err):
		p.logger.Error("the next consumer refused unsent spans for good; dropped",
			zap.Int("spans", td.SpanCount()), zap.Error(err))
		p.dropHead(ctx, u, 0, n, false)
		return true
	}
	u.refused(err)
	if rest, partly := notTaken(td, err); partly && rest.SpanCount() < td.SpanCount() {
		p.recordTaken(ctx, td, rest)
		// what is left of the n batches becomes one, holding all their chunks
		if merr := p.joinHead(u, n, rest); merr != nil {
			p.logger.Error("subagentmerge: encoding the rest of a partly taken batch failed; it is sent again whole", zap.Error(merr))
		}
		u.backoff = minUnsentBackoff // it took some: it has room again soon
	} else {
		u.backoff = min(max(2*u.backoff, minUnsentBackoff), maxUnsentBackoff)
	}
	u.retryAt.Store(p.now() + int64(u.backoff))
	return false
}

// deliverAlone sends u's first n batches one at a time, each decoded alone: what the
// next consumer refuses for good is dropped batch by batch, not with the batches
// joined to it. It reports, like deliverHead, whether they were all taken or dropped.
func (p *subagentMerge) deliverAlone(ctx context.Context, u *unsent, n int) bool {
	for range n {
		u.mu.Lock()
		b := u.items[0]
		u.mu.Unlock()
		td, err := p.decodeChunks(b.parts, b.enc)
		if err != nil {
			// only this process encoded it: a bug
			err = consumererror.NewPermanent(fmt.Errorf("subagentmerge: a queued batch does not decode: %w", err))
		} else {
			if b.versions {
				coalesce(td, b.keepFirst)
			}
			err = p.next.ConsumeTraces(ctx, td)
		}
		switch {
		case err == nil:
		case consumererror.IsPermanent(err):
			p.logger.Error("the next consumer refused unsent spans for good; dropped",
				zap.Int("spans", b.spans), zap.Error(err))
		default:
			u.refused(err)
			u.backoff = min(max(2*u.backoff, minUnsentBackoff), maxUnsentBackoff)
			u.retryAt.Store(p.now() + int64(u.backoff))
			return false
		}
		p.dropHead(ctx, u, 0, 1, err == nil)
	}
	return true
}

// joinHead replaces the queue's first n batches by one holding rest and all their
// chunks. Only the goroutine holding u.sending calls it.
func (p *subagentMerge) joinHead(u *unsent, n int, rest ptrace.Traces) error {
	enc, err := p.marshaler.MarshalTraces(rest)
	if err != nil {
		return err
	}
	u.mu.Lock()
	joined := unsentBatch{enc: enc, spans: rest.SpanCount()}
	oldBytes, oldSpans := 0, 0
	for _, b := range u.items[:n] {
		joined.seqs = append(joined.seqs, b.seqs...)
		oldBytes, oldSpans = oldBytes+int(b.size()), oldSpans+b.spans
		// rest was coalesced; read back at start, it keeps a span's first emission
		// beside its newest version, which the next send coalesces alike
		joined.versions = joined.versions || b.versions
		joined.keepFirst = joined.keepFirst || b.keepFirst
	}
	u.items = append([]unsentBatch{joined}, u.items[n:]...)
	u.mu.Unlock()
	u.n.Add(int64(1 - n))
	u.spans.Add(int64(joined.spans - oldSpans))
	u.bytes.Add(int64(len(enc) - oldBytes))
	return nil
}

// unsentBytes and unsentSpans are what waits in the unsent queues together.
func (p *subagentMerge) unsentBytes() (n int64) {
	for _, u := range p.queues() {
		n += u.bytes.Load()
	}
	return n
}

func (p *subagentMerge) unsentSpans() (n int64) {
	for _, u := range p.queues() {
		n += u.spans.Load()
	}
	return n
}

// refuseWhileFull answers a new request at once, retryably, while the unsent queue is
// over its bound.
func (p *subagentMerge) refuseWhileFull() error {
	if b := p.unsentBytes(); b > p.unsentMax {
		return fmt.Errorf("subagentmerge: %d spans (%d MiB) wait to be sent; refusing new spans until they go (retryable)",
			p.unsentSpans(), b>>20)
	}
	return nil
}

// unsentAtShutdown sends what it can of the queue once more; the rest stays on disk
// for the next start (with storage) or is lost, said in the log.
func (p *subagentMerge) unsentAtShutdown(ctx context.Context) error {
	for _, u := range p.queues() {
		u.retryAt.Store(0)
	}
	if p.queued {
		// the next consumer is an exporter that retries until the vendor takes the
		// spans: with the vendor down, shutdown would wait for ever
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, shutdownSendTimeout)
		defer cancel()
	}
	p.drainUnsent(ctx, p.now())
	n := p.unsentSpans()
	if n == 0 {
		return nil
	}
	if p.store != nil {
		p.logger.Warn("spans the next consumer refused stay on disk; the next start sends them", zap.Int64("spans", n))
		return nil
	}
	last := errors.New("not sent before shutdown")
	for _, u := range p.queues() {
		u.errMu.Lock()
		if u.lastErr != nil {
			last = u.lastErr
		}
		u.errMu.Unlock()
	}
	return fmt.Errorf("subagentmerge: %d spans the next consumer refused are lost at shutdown (no storage): %w", n, last)
}
