-- Token fields (DeerFlow migration 0002_runs_token_usage, plus the per-model JSON of PR #3658).
ALTER TABLE runs ADD COLUMN total_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN total_output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN total_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN llm_call_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lead_agent_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN subagent_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN middleware_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN token_usage_by_model JSONB NOT NULL DEFAULT '{}';
