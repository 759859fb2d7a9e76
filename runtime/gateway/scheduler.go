package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

// The line of runs per thread lives in the store (store.RunQueue), so gateways sharing
// one database behave as one: this file is the process's side of it. A run is admitted
// pending by the request that posts it; any gateway claims the next run of a free
// thread (the posting request tries its run at once, a gateway whose run ends the
// thread's next run, the scheduler any run on every poll), executes it under a lease it renews, and frees the thread by writing
// the run's final row. A gateway that dies stops renewing: its runs end as error after
// gateway.lease_timeout and the threads' next runs go to whichever gateway is free.

// activeRun is a run this process executes (claimed from the store).
type activeRun struct {
	threadID string
	runID    string
	ctx      context.Context
	cancel   context.CancelCauseFunc
	// claimed is when the run was claimed: a renewal that started earlier does not see it.
	claimed time.Time
	done    chan struct{} // closed once the run is off the active set (its row is final)
	final   chan struct{} // closed once the run's final row is written
	events  *eventLog
}

// errLeaseLost is the cause of a run whose lease this process no longer holds (it was
// expired by another gateway after the renewals failed).
var errLeaseLost = errors.New("the gateway lost the run's lease (not renewed within gateway.lease_timeout): another gateway ended the run")

// leaseExpiredReason is the error of a run whose gateway stopped renewing its lease.
func (s *Server) leaseExpiredReason() string {
	return fmt.Sprintf("the gateway executing the run stopped renewing its lease for gateway.lease_timeout (%s): it was stopped, killed or lost the store", s.cfg.LeaseTimeout)
}

// ownerName names this process in the store's leases: host, pid and a random suffix
// (a restarted process is a new owner).
func ownerName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "gateway"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), newID("")[:8])
}

// heartbeat is how often leases are renewed and expired ones ended: a third of the
// lease, at most a second (a cancel posted to another gateway reaches the executing one
// at its next renewal).
func (s *Server) heartbeat() time.Duration {
	return min(s.cfg.LeaseTimeout/3, time.Second)
}

// watch registers a wait for the run: the channel is closed when the run is claimed
// here, cancelled here while pending, or found final in the store at a poll.
func (s *Server) watch(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.waiters[runID] = append(s.waiters[runID], ch)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.waiters[runID]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.waiters, runID)
		} else {
			s.waiters[runID] = list
		}
	}
}

// notify wakes the run's waiters.
func (s *Server) notify(runID string) {
	s.mu.Lock()
	list := s.waiters[runID]
	delete(s.waiters, runID)
	s.mu.Unlock()
	for _, ch := range list {
		close(ch)
	}
}

// pollWaited wakes the waiters of runs that ended elsewhere: one store query for every
// run waited for here and not executing here.
func (s *Server) pollWaited() {
	s.mu.Lock()
	var ids []string
	for id := range s.waiters {
		if s.active[id] == nil {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), storeTimeout)
	done, err := s.store.FinishedRuns(c, ids)
	cancel()
	if err != nil {
		s.log.Warn("gateway: read the runs waited for", "error", err)
		return
	}
	for _, id := range done {
		s.notify(id)
	}
}

// schedule runs until Shutdown stops it: it starts runs admitted anywhere, renews the
// leases of the runs it executes and ends the runs of gateways that stopped renewing.
func (s *Server) schedule() {
	defer close(s.schedDone)
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	beat := time.NewTicker(s.heartbeat())
	defer beat.Stop()
	s.renewLeases() // also ends what a crashed predecessor left running
	for {
		select {
		case <-s.stopSched:
			return
		case <-poll.C:
			s.pollWaited()
		case <-beat.C:
			s.renewLeases()
		}
		s.claimRuns(store.ClaimFilter{})
	}
}

// claimRuns starts the runs the filter selects that this process can claim now (none
// while shutting down): with the zero filter every claimable run, else at most one.
func (s *Server) claimRuns(only store.ClaimFilter) {
	for !s.closing.Load() {
		c, cancel := context.WithTimeout(context.Background(), storeTimeout)
		run, ok, err := s.store.ClaimRun(c, s.owner, time.Now().Add(s.cfg.LeaseTimeout), only)
		cancel()
		if err != nil {
			s.log.Warn("gateway: claim the next run", "error", err)
			return
		}
		if !ok {
			return
		}
		ar, ok := s.register(run)
		if !ok {
			// Shutdown began between the claim and now: the run ends interrupted, as a
			// running run at shutdown does.
			c, cancel := context.WithTimeout(context.Background(), storeTimeout)
			if _, err := s.store.InterruptRuns(c, []string{run.RunID}, errShutdown.Error()); err != nil {
				s.log.Error("gateway: interrupt a run claimed during shutdown", "run_id", run.RunID, "error", err)
			}
			cancel()
			return
		}
		go s.execute(ar, run)
		if only != (store.ClaimFilter{}) {
			return
		}
	}
}

// register puts a claimed run on the active set, its context carrying the caller's
// trace context and baggage; false once Shutdown began.
func (s *Server) register(run store.Run) (*activeRun, bool) {
	ctx, cancel := context.WithCancelCause(s.runCtx)
	if len(run.TraceCarrier) > 0 {
		remote := traceContext.Extract(context.Background(), propagation.MapCarrier(run.TraceCarrier))
		if sc := trace.SpanContextFromContext(remote); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
		if b := baggage.FromContext(remote); b.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
		if v := run.TraceCarrier[telemetry.LangSmithTraceHeader]; v != "" {
			ctx = telemetry.ContextWithCallerPlacement(ctx, v)
		}
	}
	ar := &activeRun{threadID: run.ThreadID, runID: run.RunID, ctx: ctx, cancel: cancel, claimed: time.Now(),
		done: make(chan struct{}), final: make(chan struct{}), events: newEventLog()}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		cancel(errShutdown)
		return nil, false
	}
	s.active[run.RunID] = ar
	s.runsWG.Add(1) // under mu with the closing check: Shutdown's Wait never races an Add
	s.mu.Unlock()
	s.metrics.active.Inc()
	s.notify(run.RunID)
	return ar, true
}

// release takes a finished run off the active set and starts the thread's next run
// here (a narrow claim: the other threads' runs are the scheduler's).
func (s *Server) release(ar *activeRun) {
	s.mu.Lock()
	delete(s.active, ar.runID)
	s.mu.Unlock()
	s.metrics.active.Dec()
	s.runsWG.Done()
	close(ar.done)
	s.claimRuns(store.ClaimFilter{ThreadID: ar.threadID})
}

// renewLeases extends the leases of the runs this process executes, stops those whose
// lease it lost or whose cancel was requested through the store, and ends as error the
// runs of gateways that stopped renewing theirs.
func (s *Server) renewLeases() {
	began := time.Now()
	c, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	leases, err := s.store.RenewLeases(c, s.owner, began.Add(s.cfg.LeaseTimeout))
	if err != nil {
		s.log.Warn("gateway: renew run leases", "error", err)
	} else {
		held := make(map[string]bool, len(leases))
		for _, l := range leases {
			held[l.RunID] = true
			if l.CancelRequested {
				if ar := s.activeRun(l.RunID); ar != nil {
					ar.cancel(errCancelled)
				}
			}
		}
		s.mu.Lock()
		for id, ar := range s.active {
			if !held[id] && ar.claimed.Before(began) {
				ar.cancel(errLeaseLost)
			}
		}
		s.mu.Unlock()
	}
	ids, err := s.store.ExpireLeases(c, time.Now(), s.leaseExpiredReason())
	if err != nil {
		s.log.Warn("gateway: end runs with expired leases", "error", err)
		return
	}
	for _, id := range ids {
		s.log.Warn("gateway: run ended: its gateway stopped renewing the lease", "run_id", id, "lease_timeout", s.cfg.LeaseTimeout)
		s.notify(id)
	}
}

// activeRun returns the run if this process executes it.
func (s *Server) activeRun(runID string) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[runID]
}

// lookup returns the run if this process executes it or executed it recently (its
// events are kept for late streams).
func (s *Server) lookup(runID string) *activeRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar := s.active[runID]; ar != nil {
		return ar
	}
	return s.recent[runID]
}

// awaitFinal waits until the run's row is final, wherever it executes, and returns it.
// A run executing here is awaited directly; otherwise the wait is woken when the run is
// claimed here or found final at a poll.
func (s *Server) awaitFinal(ctx context.Context, runID string) (store.Run, error) {
	for {
		woken, unwatch := s.watch(runID)
		if ar := s.activeRun(runID); ar != nil {
			unwatch()
			select {
			case <-ar.done:
			case <-ctx.Done():
				return store.Run{}, ctx.Err()
			}
		}
		run, err := s.store.GetRun(ctx, runID)
		if err != nil || run.Status.Final() {
			unwatch()
			return run, err
		}
		select {
		case <-woken:
		case <-ctx.Done():
			unwatch()
			return store.Run{}, ctx.Err()
		}
	}
}
