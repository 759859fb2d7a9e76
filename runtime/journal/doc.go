// Package journal is DeerFlow's RunJournal (docs/runtime.md#journal): the run-scoped
// accountant of one lead-agent run. It counts tokens per caller bucket and per model,
// deduplicates inline model calls by model-call id and external usage records by
// source_run_id, keeps the message summary (message_count, first human and last AI
// message), records run/middleware events, and produces CompletionData
// (get_completion_data()), which the CLI prints and the run store persists.
//
// It also holds TokenCollector, the per-subagent-execution collector, whose records
// reach the parent journal once as external records.
//
// # Who feeds it
//
// The agent loop adapts the journal to model.Observer (agent.ObserveJournal) for the lead
// agent's context, so lead-agent calls and middleware calls made with the lead context
// arrive through OnLLMEnd with their caller tag. A subagent runs with isolated observers
// (its TokenCollector only); the task tool reports the collector's snapshot through
// RecordExternalLLMUsageRecords exactly once per execution. That is DeerFlow's
// "never inline, only external" rule that keeps subagent tokens from being counted twice.
//
// # Concurrency
//
// Every method is safe for concurrent use (subagents finish in parallel). The progress
// reporter runs on its own goroutine (a timer) or inline for interval 0; it must not call
// back into the journal's mutating methods.
package journal
