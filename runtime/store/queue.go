package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RunQueue is the line of runs per thread, kept in the store so that gateway processes
// sharing one database behave as one gateway: a thread runs one run at a time, in the
// order the runs were admitted, whichever process admitted or executes them.
//
// A run is admitted pending (AdmitRun); any process claims the next pending run of a
// thread with no running run (ClaimRun), which makes it running under that process's
// lease. The process renews its leases while it runs (RenewLeases) and finalises the run
// with UpdateRunCompletion, which frees the thread. A lease not renewed in time —
// the process died — ends the run as error (ExpireLeases); the thread's next run is
// then claimed by whichever process is free.
type RunQueue interface {
	// AdmitRun inserts r as pending at the end of its thread's line. When the thread
	// has a run pending or running and enqueue is false, nothing is inserted and the
	// error is a *BusyError naming that run. The check and the insert are one
	// transaction under the thread's lock, so two processes never both admit.
	// r.Input "" admits a run that is not ready yet (its files are being stored): it
	// holds its place but is not claimed until SetRunInput; owner's lease until
	// leaseUntil covers that time.
	AdmitRun(ctx context.Context, r Run, enqueue bool, owner string, leaseUntil time.Time) error
	// SetRunInput makes an admitted run ready: its input is set and the admitting
	// lease released. False when the run is no longer pending.
	SetRunInput(ctx context.Context, runID, input string) (bool, error)
	// ClaimRun moves the oldest ready pending run whose thread has no running run (and
	// no earlier pending run) to running, held by owner until leaseUntil; only a run
	// the filter selects. ok is false when there is none.
	ClaimRun(ctx context.Context, owner string, leaseUntil time.Time, only ClaimFilter) (r Run, ok bool, err error)
	// RenewLeases extends owner's running runs to leaseUntil and returns them: a run
	// owner executes that is missing lost its lease (it was expired or finished
	// elsewhere) and must stop.
	RenewLeases(ctx context.Context, owner string, leaseUntil time.Time) ([]Lease, error)
	// ExpireLeases ends every pending or running run whose lease ended before now as
	// error with reason, and returns their ids.
	ExpireLeases(ctx context.Context, now time.Time, reason string) ([]string, error)
	// RequestCancel cancels a run: a pending one is interrupted at once (with reason);
	// a running one gets its cancel flag, which the executing process reads at its
	// next RenewLeases. The outcome says which, or that the run had already ended.
	RequestCancel(ctx context.Context, runID, reason string) (CancelOutcome, error)
	// FinishedRuns returns the ids among runIDs whose run is final (or gone): one query
	// for every run a process waits for.
	FinishedRuns(ctx context.Context, runIDs []string) ([]string, error)
}

// ClaimFilter narrows a claim: the zero filter takes any thread's next run; RunID takes
// only that run (if it is its thread's next); ThreadID only that thread's next run. A
// narrow claim reads a few rows where the open one scans the pending runs.
type ClaimFilter struct {
	RunID    string
	ThreadID string
}

// Lease is one run a process holds, as RenewLeases found it.
type Lease struct {
	RunID string
	// CancelRequested is set once RequestCancel reached the running run.
	CancelRequested bool
}

// CancelOutcome is what RequestCancel did.
type CancelOutcome int

// RequestCancel outcomes.
const (
	// CancelNotFound: no such run.
	CancelNotFound CancelOutcome = iota
	// CancelledPending: the run was pending and is now interrupted.
	CancelledPending
	// CancelRequested: the run is running; its process will stop it.
	CancelRequested
	// CancelTooLate: the run had already ended.
	CancelTooLate
)

// BusyError is a run refused because its thread has a run in progress.
type BusyError struct {
	ThreadID string
	// RunID is the thread's run pending or running.
	RunID string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("thread %s has run %s in progress", e.ThreadID, e.RunID)
}

// ErrStateConflict is a thread state save refused because another save happened since
// the state was loaded.
var ErrStateConflict = errors.New("the thread's state was saved by someone else since it was loaded")
