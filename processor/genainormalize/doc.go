// Package genainormalize is a stateless traces processor that maps the GenAI conventions
// instrumentations use today (older GenAI semconv, OpenLLMetry, OpenInference, the Vercel
// AI SDK, LangChain run metadata) onto agentmeter's contract attributes, in place, so
// the merge, the cost step, the token metrics and the exporters read one set of keys.
//
// It runs first in every traces pipeline. It writes a contract key only when the span
// lacks it (the emitter's own semconv value always wins), maps usage only on model-call
// spans (genai.IsModelCallSpan) and never invents usage: a call that reported none
// carries none. docs/genainormalize.md has the table of what each attribute becomes.
//
// keys.go says where each convention keeps each value (the slots a span is scanned into,
// best source first), normalize.go holds the rules that write the contract keys from
// them, and encoded.go decodes the values some conventions pack as JSON into one string
// attribute.
package genainormalize // import "github.com/agentmeter/agentmeter/processor/genainormalize"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
