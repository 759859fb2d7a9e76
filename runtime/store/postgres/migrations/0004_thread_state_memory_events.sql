-- Thread state between runs: the conversation (messages), title, todos and the other
-- state channels (summary_text, delegations, uploaded_files, ... as one JSON object), so
-- a run continues its thread. JSON is kept as TEXT: messages may hold any string, and
-- the runtime reads the blob whole.
CREATE TABLE thread_states (
    thread_id  TEXT PRIMARY KEY,
    messages   TEXT NOT NULL DEFAULT '[]',
    title      TEXT,
    todos      TEXT NOT NULL DEFAULT '[]',
    channels   TEXT NOT NULL DEFAULT '{}',
    updated_at BIGINT NOT NULL
);
-- Per-user memory of each agent (MemoryMiddleware), shared by every replica.
CREATE TABLE memories (
    user_id    TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    content    TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, agent_name)
);
-- The run journal's events (middleware audit, lifecycle, model responses), in order.
CREATE TABLE run_events (
    run_id     TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    thread_id  TEXT NOT NULL,
    event_type TEXT NOT NULL,
    category   TEXT NOT NULL,
    content    TEXT,
    metadata   TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
