// Package model is the runtime's one interface to language models: the Provider a
// backend implements, the ChatModel every caller uses, the request/response types
// (including streaming deltas), the provider registry and the factory that wraps every
// model so each call emits exactly one `chat {model}` span with its usage (docs/contract.md#spans).
//
// # Layers
//
//	caller (agent loop, middleware, subagent)
//	   │  ChatModel.Generate(ctx, *Request)
//	   ▼
//	traced model (this package, made by New/Factory) ── starts the chat span, resolves
//	   │  Stream, calls observers (the RunJournal, a subagent's token collector), ends or
//	   │  holds the span
//	   ▼
//	Provider.Generate (openai/, anthropic/, scripted/) ── talks to the backend only
//
// Providers never create spans, never read the caller tag and never talk to the journal:
// the factory wrapper is the one place tracing and accounting are attached, so a new
// provider cannot forget them and a token is counted once.
//
// # Provider contract
//
//   - Generate returns one aggregated AI message. When req.Stream is true the provider
//     uses its streaming API, calls req.OnDelta for each text/reasoning delta (from the
//     calling goroutine, in order; never after Generate returns) and aggregates.
//   - Usage goes into Response.Message.UsageMetadata normalised per docs/contract.md#usage (input
//     includes cache read and cache creation; output includes reasoning) and is nil when
//     the backend reported none. A streamed OpenAI response takes usage from the final
//     chunk, even when that chunk also carries choices.
//   - Response.ID, Response.Model and Response.FinishReasons are what the backend said;
//     the provider also mirrors them into response_metadata (id, model_name,
//     finish_reason, model_provider) as LangChain does.
//   - Errors are returned wrapped with %w; HTTP errors keep their status code reachable
//     with errors.As (see StatusError) so middleware can classify 429/5xx for retries.
//     A provider never retries on its own.
//   - Generate must honour ctx cancellation and must be safe for concurrent use: the
//     agent runs subagents and middleware calls in parallel on one model.
//   - The request is read-only for the provider.
//
// # Registration
//
// Providers plug in with Register(name, Constructor) from their package's init; the
// command line imports them for their side effect (import _ ".../runtime/model/openai").
// The factory looks the provider up by config.Model.Provider, so adding a provider never
// edits this package.
//
// # Span lifetime and hooks
//
// A successful call's chat span normally ends when Generate returns. The agent loop wants
// after_model hooks (TokenUsageMiddleware sets agentmeter.step.kind) to annotate the span of
// the response they are looking at, so it calls HoldSpans before the wrap_model_call chain:
// successful spans started under the held context stay open until the hold is released,
// which the loop does after the last after_model hook. During after_model, ResponseSpan(ctx)
// returns the span of the current response (a no-op annotator outside a held call). Failed
// calls always end their span at once, with status ERROR and error.type.
package model
