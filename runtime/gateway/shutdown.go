package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Shutdown stops accepting requests and starting runs, lets running runs finish until
// ctx ends, then cancels the rest: they are persisted as interrupted (with their
// counters so far), and any row of this process still running is marked interrupted as
// a backstop. Queued runs stay pending in the store for another gateway sharing it, or
// this one after a restart. Leases are renewed until the runs are done. Streams end with
// their runs. It returns after the store writes; the caller closes the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true) // under mu: register never adds to runsWG after this
	srv := s.httpSrv
	s.mu.Unlock()
	httpDone := make(chan error, 1)
	if srv != nil {
		go func() { httpDone <- srv.Shutdown(ctx) }()
	} else {
		httpDone <- nil
	}
	runsDone := make(chan struct{})
	go func() { s.runsWG.Wait(); close(runsDone) }()
	select {
	case <-runsDone:
	case <-ctx.Done():
		s.mu.Lock()
		n := len(s.active)
		s.mu.Unlock()
		s.log.Warn("gateway: shutdown deadline reached; interrupting runs", "runs", n)
		s.cancelAll(errShutdown)
		select {
		case <-runsDone:
		case <-time.After(storeTimeout):
		}
	}
	// Backstop: whatever is still registered (a run goroutine stuck past the grace
	// period) is marked interrupted so no row stays running forever.
	s.mu.Lock()
	var left []string
	for id := range s.active {
		left = append(left, id)
	}
	s.mu.Unlock()
	var errs []error
	if len(left) > 0 {
		c, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if _, err := s.store.InterruptRuns(c, left, errShutdown.Error()); err != nil {
			errs = append(errs, fmt.Errorf("gateway: interrupt runs: %w", err))
		}
		cancel()
	}
	if err := <-httpDone; err != nil && srv != nil {
		_ = srv.Close() // streams of runs that ended have returned; close the rest
	}
	s.cancelAll(errShutdown)
	s.stopOnce.Do(func() { close(s.stopSched) })
	<-s.schedDone
	return errors.Join(errs...)
}
