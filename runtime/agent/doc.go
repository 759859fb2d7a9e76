// Package agent is the agent loop of the runtime: LangChain create_agent's graph
// (before_agent → [before_model → model → after_model → tools]* → after_agent) with
// DeerFlow's middleware hook semantics (docs/runtime.md#middleware-hooks-runtimeagent), a tool node that
// runs one response's tool calls concurrently, a recursion limit, context cancellation
// everywhere, and the invoke_agent / execute_tool spans of docs/contract.md#spans.
//
// # Hooks and their order
//
// A middleware is any value with a Name that implements one or more of the hook
// interfaces below. For a list [m0, m1, ..., mN]:
//
//   - BeforeAgent: once per run, before the first model call, in list order (m0 first).
//   - BeforeModel: before every model call, in list order.
//   - WrapModelCall: around every model call; m0 is the OUTERMOST layer, mN is closest
//     to the model. A wrapper may rewrite the request (on a Clone: rewrites are
//     ephemeral, never persisted to the state), call next zero or more times (retry),
//     or return a response without calling next (short-circuit, e.g. an error fallback).
//   - AfterModel: after every model call, in REVERSE list order (mN first) — DeerFlow
//     relies on this: SafetyFinishReason is registered late so it sees the raw response
//     first (DeerFlow puts Safety and Clarification last).
//   - WrapToolCall: around every tool execution; m0 outermost. May short-circuit (e.g.
//     Clarification returns a ToolResponse with Update.JumpTo = "end").
//   - AfterAgent: once at the end of the run (also after jump_to end), in REVERSE order.
//
// Each BeforeAgent/BeforeModel/AfterModel/AfterAgent hook is its own step: the Update it
// returns is applied to the state before the next hook runs, so later hooks see it.
//
// # jump_to
//
//   - AfterModel returning Update.JumpTo = "model" sends the loop straight back to the
//     model node (before_model runs again; the remaining after_model hooks — those
//     earlier in the list — are skipped for that response; the response's tool calls are
//     not executed). "end" ends the run after applying the update (no tools, no further
//     model call; after_agent still runs).
//   - BeforeAgent / BeforeModel returning "end" skip to after_agent; "model" is ignored
//     there (the model is next anyway).
//   - A tool result whose Update.JumpTo is "end" (ask_clarification) ends the run after
//     the current tool batch.
//
// # Errors and cancellation
//
// A hook error aborts the run: the remaining hooks, including after_agent, do not run
// (LangGraph propagates the exception the same way) and Run returns the error wrapped
// with the hook's name. Tool errors do not abort: after the WrapToolCall chain has seen
// the error, the tool node turns it into an error ToolMessage (content "Error: ...") and
// marks the execute_tool span ERROR. Cancelling ctx stops the run at the next step and
// cancels running tools, model calls and subagents; Run returns ctx.Err() wrapped.
//
// # Concurrency and ownership
//
// Hooks receive the state as a read-only *state.State and the run's *Runtime. Hooks of
// one run are never called concurrently with each other, except WrapToolCall, which runs
// once per tool call of a response, concurrently. A middleware instance may be shared by
// many runs, so per-run data goes in Runtime.Context, not in middleware fields (or is
// guarded by the middleware). Tool calls of one response run in parallel (bounded by
// Config.ToolConcurrency); their Updates are applied in tool-call order after all
// finished, and their ToolMessages are appended in tool-call order.
package agent
