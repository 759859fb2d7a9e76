// Package telemetry sets up the runtime's OpenTelemetry tracer provider (OTLP/HTTP, the
// standard OTEL_* environment variables, bounded export timeouts) and carries the
// run-scoped span attributes of docs/contract.md#spans through context.Context.
//
// Every span of a run carries gen_ai.conversation.id (thread id), agentmeter.run.id,
// enduser.id when known and agentmeter.caller. The agent loop stores the first three with
// WithRun when a run starts and the caller tag with WithCaller (the lead loop uses
// "lead_agent", a subagent "subagent:<name>", a middleware making its own model call
// "middleware:<name>"); span creators read them back with CommonAttributes.
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
)

// ScopeName is the instrumentation scope of every span the runtime emits.
const ScopeName = "github.com/agentmeter/agentmeter/runtime"

// Run identifies the run a context belongs to.
type Run struct {
	ThreadID string
	RunID    string
	UserID   string
}

type (
	runKey      struct{}
	callerKey   struct{}
	providerKey struct{}
	contentKey  struct{}
)

// WithRun returns ctx carrying the run's identity.
func WithRun(ctx context.Context, r Run) context.Context { return context.WithValue(ctx, runKey{}, r) }

// RunFrom returns the run identity stored by WithRun (zero value when absent).
func RunFrom(ctx context.Context) Run {
	r, _ := ctx.Value(runKey{}).(Run)
	return r
}

// WithCaller returns ctx carrying the caller tag (DeerFlow's tags: "lead_agent",
// "subagent:<name>", "middleware:<name>").
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom returns the caller tag of ctx, "lead_agent" when none was set (DeerFlow
// counts untagged calls as the lead agent's, DeerFlow's caller identification from tags).
func CallerFrom(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(string); ok && c != "" {
		return c
	}
	return genai.BucketLeadAgent
}

// CommonAttributes are the attributes every span of a run carries (docs/contract.md#attributes), with
// caller as agentmeter.caller. Empty ids are left out.
func CommonAttributes(ctx context.Context, caller string) []attribute.KeyValue {
	r := RunFrom(ctx)
	kv := make([]attribute.KeyValue, 0, 4)
	if r.ThreadID != "" {
		kv = append(kv, attribute.String(genai.AttrConversationID, r.ThreadID))
	}
	if r.RunID != "" {
		kv = append(kv, attribute.String(genai.AttrRunID, r.RunID))
	}
	if r.UserID != "" {
		kv = append(kv, attribute.String(genai.AttrEndUserID, r.UserID))
	}
	return append(kv, attribute.String(genai.AttrCaller, caller))
}

// WithTracerProvider makes spans started from ctx use tp instead of the global provider
// (tests and embedders that run several providers in one process).
func WithTracerProvider(ctx context.Context, tp trace.TracerProvider) context.Context {
	return context.WithValue(ctx, providerKey{}, tp)
}

// Tracer returns the runtime's tracer for ctx: the provider set by WithTracerProvider,
// else the global one (otel.GetTracerProvider, which Setup installs).
func Tracer(ctx context.Context) trace.Tracer {
	if tp, ok := ctx.Value(providerKey{}).(trace.TracerProvider); ok && tp != nil {
		return tp.Tracer(ScopeName)
	}
	return otel.GetTracerProvider().Tracer(ScopeName)
}

// WithContentCapture turns recording of prompts, completions and tool arguments
// (gen_ai.input.messages / gen_ai.output.messages) on or off for spans started from ctx.
// It is off unless opted in (docs/contract.md#attributes).
func WithContentCapture(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, contentKey{}, on)
}

// ContentCapture reports whether content recording is on for ctx.
func ContentCapture(ctx context.Context) bool {
	on, _ := ctx.Value(contentKey{}).(bool)
	return on
}
