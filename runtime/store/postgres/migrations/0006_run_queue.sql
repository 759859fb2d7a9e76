-- The line of runs per thread, kept in the database so gateway replicas sharing it
-- behave as one gateway: queue_seq orders the runs admitted (one order across
-- replicas); input is the run's human message (JSON), NULL while the admitting replica
-- still stores the run's files; trace_carrier the caller's traceparent, tracestate and
-- baggage (JSON); the replica executing a run holds its lease (lease_owner, lease_until,
-- renewed while it runs) and polls cancel_requested.
ALTER TABLE runs ADD COLUMN queue_seq BIGSERIAL;
ALTER TABLE runs ADD COLUMN input TEXT;
ALTER TABLE runs ADD COLUMN trace_carrier TEXT;
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until BIGINT;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
-- Runs left pending or running by a binary without leases (a crash, a lost backstop)
-- would hold their threads forever: their lease has already ended, so the first
-- gateway's renewal ends them as error and frees the threads.
UPDATE runs SET lease_until = 0 WHERE status IN ('pending', 'running');
CREATE INDEX runs_queue ON runs (status, queue_seq);
CREATE INDEX runs_thread_status ON runs (thread_id, status);
-- A run saves its thread's state only if nobody saved it since the run loaded it.
ALTER TABLE thread_states ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
