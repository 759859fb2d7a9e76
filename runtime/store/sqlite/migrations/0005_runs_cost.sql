-- Each run's cost in USD as the run journal priced it (docs/cost.md): a JSON object
-- {total_cost_usd, cost_usd_by_caller, cost_usd_by_model, unpriced_llm_call_count};
-- NULL while nothing was priced. Added next to DeerFlow's columns, which stay as they are.
ALTER TABLE runs ADD COLUMN cost_usd TEXT;
