package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentmeter/agentmeter/runtime/store"
)

// claimAttempts bounds how often ClaimRun retries when another process took its
// candidate between the look-up and the update.
const claimAttempts = 4

// lockThread takes the thread's lock for the rest of tx (a no-op on single-writer
// backends).
func (s *Store) lockThread(ctx context.Context, tx *sql.Tx, threadID string) error {
	if s.d.ThreadLock == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.q(s.d.ThreadLock), threadID); err != nil {
		return fmt.Errorf("lock thread %q: %w", threadID, err)
	}
	return nil
}

// AdmitRun implements store.RunQueue.
func (s *Store) AdmitRun(ctx context.Context, r store.Run, enqueue bool, owner string, leaseUntil time.Time) error {
	if err := store.ValidateRun(r); err != nil {
		return fmt.Errorf("admit run: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("admit run %q: begin: %w", r.RunID, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := s.lockThread(ctx, tx, r.ThreadID); err != nil {
		return fmt.Errorf("admit run %q: %w", r.RunID, err)
	}
	if !enqueue {
		var busy string
		err := tx.QueryRowContext(ctx, s.q(`SELECT run_id FROM runs WHERE thread_id = ? AND status IN ('pending', 'running')
			ORDER BY queue_seq LIMIT 1`), r.ThreadID).Scan(&busy)
		switch {
		case err == nil:
			return &store.BusyError{ThreadID: r.ThreadID, RunID: busy}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("admit run %q: find the thread's run in progress: %w", r.RunID, err)
		}
	}
	r.Status = store.StatusPending
	var lease int64
	if r.Input == "" {
		lease = micros(leaseUntil)
	} else {
		owner = ""
	}
	if err := s.insertRun(ctx, tx, r, owner, lease); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("admit run %q: commit: %w", r.RunID, err)
	}
	return nil
}

// SetRunInput implements store.RunQueue.
func (s *Store) SetRunInput(ctx context.Context, runID, input string) (bool, error) {
	if input == "" {
		return false, fmt.Errorf("set input of run %q: input is required", runID)
	}
	return s.exec(ctx, "set input of run "+runID,
		`UPDATE runs SET input = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE run_id = ? AND status = 'pending'`,
		input, micros(s.now()), runID)
}

// claimable is the condition for run r to start now: ready, pending, no running run on
// its thread and no earlier pending one.
const claimable = `r.status = 'pending' AND r.input IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.thread_id = r.thread_id AND x.status = 'running')
	AND NOT EXISTS (SELECT 1 FROM runs y WHERE y.thread_id = r.thread_id AND y.status = 'pending' AND y.queue_seq < r.queue_seq)`

// ClaimRun implements store.RunQueue. The candidate is found with its row locked (other
// processes skip it), then the thread's lock is taken and the condition checked again
// in the update, so two processes never start two runs of one thread.
func (s *Store) ClaimRun(ctx context.Context, owner string, leaseUntil time.Time, only store.ClaimFilter) (store.Run, bool, error) {
	if owner == "" {
		return store.Run{}, false, errors.New("claim run: owner is required")
	}
	for range claimAttempts {
		r, ok, retry, err := s.claimOnce(ctx, owner, leaseUntil, only)
		if err != nil || ok || !retry {
			return r, ok, err
		}
	}
	return store.Run{}, false, nil
}

func (s *Store) claimOnce(ctx context.Context, owner string, leaseUntil time.Time, only store.ClaimFilter) (r store.Run, ok, retry bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	where, args := claimable, []any{}
	if only.RunID != "" {
		where, args = "r.run_id = ? AND "+where, append(args, only.RunID)
	}
	if only.ThreadID != "" {
		where, args = "r.thread_id = ? AND "+where, append(args, only.ThreadID)
	}
	var runID, threadID string
	err = tx.QueryRowContext(ctx, s.q(`SELECT r.run_id, r.thread_id FROM runs r WHERE `+where+`
		ORDER BY r.queue_seq LIMIT 1 `+s.d.SkipLocked), args...).Scan(&runID, &threadID)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, false, false, nil
	}
	if err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run: find the next run: %w", err)
	}
	if err := s.lockThread(ctx, tx, threadID); err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run %q: %w", runID, err)
	}
	res, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET status = 'running', lease_owner = ?, lease_until = ?, updated_at = ?
		WHERE run_id = ? AND EXISTS (SELECT 1 FROM runs r WHERE r.run_id = ? AND `+claimable+`)`),
		owner, micros(leaseUntil), micros(s.now()), runID, runID)
	if err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run %q: %w", runID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return store.Run{}, false, true, err // taken or overtaken meanwhile: look again
	}
	r, err = scanRun(tx.QueryRowContext(ctx, s.q(`SELECT `+runColumns+` FROM runs WHERE run_id = ?`), runID))
	if err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run %q: read it: %w", runID, err)
	}
	if err := tx.Commit(); err != nil {
		return store.Run{}, false, false, fmt.Errorf("claim run %q: commit: %w", runID, err)
	}
	return r, true, false, nil
}

// RenewLeases implements store.RunQueue (one statement for all of owner's runs).
func (s *Store) RenewLeases(ctx context.Context, owner string, leaseUntil time.Time) ([]store.Lease, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`UPDATE runs SET lease_until = ? WHERE lease_owner = ? AND status = 'running'
		RETURNING run_id, cancel_requested`), micros(leaseUntil), owner)
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", owner, err)
	}
	defer rows.Close()
	var out []store.Lease
	for rows.Next() {
		var (
			l      store.Lease
			cancel int64
		)
		if err := rows.Scan(&l.RunID, &cancel); err != nil {
			return nil, fmt.Errorf("renew leases of %s: %w", owner, err)
		}
		l.CancelRequested = cancel != 0
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", owner, err)
	}
	return out, nil
}

// ExpireLeases implements store.RunQueue.
func (s *Store) ExpireLeases(ctx context.Context, now time.Time, reason string) ([]string, error) {
	t := micros(now)
	rows, err := s.db.QueryContext(ctx, s.q(`UPDATE runs SET status = 'error', error = ?, updated_at = ?, finished_at = ?
		WHERE status IN ('pending', 'running') AND lease_until IS NOT NULL AND lease_until < ?
		RETURNING run_id`), reason, t, t, t)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("expire leases: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	return out, nil
}

// RequestCancel implements store.RunQueue.
func (s *Store) RequestCancel(ctx context.Context, runID, reason string) (store.CancelOutcome, error) {
	now := micros(s.now())
	done, err := s.exec(ctx, "cancel run "+runID,
		`UPDATE runs SET status = 'interrupted', error = ?, updated_at = ?, finished_at = ? WHERE run_id = ? AND status = 'pending'`,
		nullable(reason), now, now, runID)
	if err != nil || done {
		return store.CancelledPending, err
	}
	flagged, err := s.exec(ctx, "cancel run "+runID,
		`UPDATE runs SET cancel_requested = 1 WHERE run_id = ? AND status = 'running'`, runID)
	if err != nil || flagged {
		return store.CancelRequested, err
	}
	if _, err := s.GetRun(ctx, runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.CancelNotFound, nil
		}
		return store.CancelNotFound, err
	}
	return store.CancelTooLate, nil
}

// finishedBatch bounds the ids of one FinishedRuns query.
const finishedBatch = 500

// FinishedRuns implements store.RunQueue.
func (s *Store) FinishedRuns(ctx context.Context, runIDs []string) ([]string, error) {
	var out []string
	for len(runIDs) > 0 {
		batch := runIDs[:min(len(runIDs), finishedBatch)]
		runIDs = runIDs[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT run_id FROM runs WHERE status IN ('pending', 'running') AND run_id IN (`+placeholders(len(batch))+`)`), args...)
		if err != nil {
			return nil, fmt.Errorf("finished runs: %w", err)
		}
		open := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("finished runs: %w", err)
			}
			open[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("finished runs: %w", err)
		}
		for _, id := range batch {
			if !open[id] {
				out = append(out, id)
			}
		}
	}
	return out, nil
}
