-- Threads and runs (DeerFlow persistence/run/model.py, without the token fields).
CREATE TABLE threads (
    thread_id  TEXT PRIMARY KEY,
    user_id    TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE runs (
    run_id              TEXT PRIMARY KEY,
    thread_id           TEXT NOT NULL,
    user_id             TEXT,
    status              TEXT NOT NULL DEFAULT 'pending',
    operation_kind      TEXT NOT NULL DEFAULT 'run',
    model_name          VARCHAR(128),
    error               TEXT,
    stop_reason         TEXT,
    message_count       BIGINT NOT NULL DEFAULT 0,
    first_human_message TEXT,
    last_ai_message     TEXT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    finished_at         BIGINT
);
CREATE INDEX runs_thread_id ON runs (thread_id, created_at);
