-- The line of runs per thread, kept in the database (see the PostgreSQL migration; one
-- process serves a SQLite file, but the same queries run on both): queue_seq orders the
-- runs admitted; input is the run's human message (JSON), NULL while its files are
-- stored; trace_carrier the caller's trace headers (JSON); lease_owner/lease_until the
-- executing process's lease; cancel_requested a cancel to deliver.
ALTER TABLE runs ADD COLUMN queue_seq INTEGER;
ALTER TABLE runs ADD COLUMN input TEXT;
ALTER TABLE runs ADD COLUMN trace_carrier TEXT;
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until INTEGER;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET queue_seq = rowid;
-- Runs left pending or running by a binary without leases (a crash, a lost backstop)
-- would hold their threads forever: their lease has already ended, so the first
-- gateway's renewal ends them as error and frees the threads.
UPDATE runs SET lease_until = 0 WHERE status IN ('pending', 'running');
CREATE INDEX runs_queue ON runs (status, queue_seq);
CREATE INDEX runs_thread_status ON runs (thread_id, status);
-- A run saves its thread's state only if nobody saved it since the run loaded it.
ALTER TABLE thread_states ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
