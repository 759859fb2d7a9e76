-- The OpenTelemetry trace id each run exported, to join a run row with its trace.
ALTER TABLE runs ADD COLUMN trace_id TEXT;
