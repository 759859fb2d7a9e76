// Package middleware is DeerFlow's lead-agent middleware chain for the agentmeter runtime
// (docs/middleware.md), one file per middleware, each named after DeerFlow's
// class (Name() returns "ThreadDataMiddleware", ..., "ClarificationMiddleware").
//
// # Assembly
//
// BuildMiddlewares assembles the chain in DeerFlow's two phases (DeerFlow's chain assembly and order):
// BuildRuntimeMiddlewares (the runtime-shared phase: thread data, uploads, sandbox,
// dangling tool-call patch, LLM error handling, guardrails, tool error handling), then the
// lead-agent phase (dynamic context ... token budget), then the extension points (the
// programmatic custom middlewares, then configured extensions), then the fixed tail
// (TerminalResponse, ModelLengthFinishReason, SafetyFinishReason, Clarification).
// AssertOrdering checks the invariants the tail exists for; HookOrder reports the
// resulting per-hook execution order (what `agentmeter chain` prints).
//
// # Ordering (runtime/agent semantics, DeerFlow's hook execution model)
//
// before_agent and before_model run in list order; after_model and after_agent in
// reverse list order (the last registered middleware sees a response first); the wrap
// hooks compose with index 0 outermost. That is why SafetyFinishReason is registered after
// LoopDetection (it strips truncated tool calls before loop accounting sees them) and
// Clarification is last (innermost tool wrapper: every outer wrapper ran its pre-checks
// before ask_clarification ends the run).
//
// # Concurrency and state
//
// Middleware values are built once and shared by concurrent runs. Per-run data lives in
// the run's agent.RunContext (see runScoped); per-thread data (loop-detection history) in
// mutex-guarded maps bounded like DeerFlow's. Hooks never mutate the State they receive:
// they return state.Update values (messages replaced by id), and request rewrites in
// wrap_model_call work on req.Request.Clone().
//
// # Model calls
//
// Title, summarization and memory updates call a model themselves with
// model.Request.Caller = "middleware:<name>" (genai.MiddlewareCaller), so each call gets
// its own chat span under the lead invoke_agent span and lands in the journal's
// middleware bucket.
package middleware
