// Package subagent runs subagents for the lead agent: the Executor (concurrency limit,
// timeout, cooperative cancellation, per-execution token collection) and the task tool
// that dispatches through it and returns DeerFlow's terminal ToolMessage
// (docs/runtime.md#subagents).
//
// # Usage accounting
//
// A subagent runs with model.IsolateObservers: its model calls reach only its own
// journal.TokenCollector (deduplicated by model-call id), never the parent's RunJournal
// inline. The task tool reports the collector's snapshot to the parent journal exactly once
// per execution — on completion, failure, timeout, polling timeout and parent
// cancellation alike — and stamps the summed usage on the ToolMessage as
// subagent_token_usage, which TokenUsageMiddleware merges onto the dispatching AI message.
//
// # Spans
//
// The subagent's `invoke_agent {name}` span is started from the tool's context, so it is a
// child of the `execute_tool task` span (docs/contract.md#spans) and carries gen_ai.tool.call.id = the
// task call's id; its chat and execute_tool spans nest under it with caller
// "subagent:<name>". The task tool sets agentmeter.subagent.status on its execute_tool span.
package subagent
