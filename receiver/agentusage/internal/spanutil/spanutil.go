// Package spanutil holds the span builder the LangSmith and Langfuse faces still use
// while they move onto internal/record and internal/build.
package spanutil

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/metadata"
)

// Builder collects spans into one ptrace.Traces, one ResourceSpans per service name.
type Builder struct {
	td     ptrace.Traces
	scopes map[string]ptrace.SpanSlice
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{td: ptrace.NewTraces(), scopes: map[string]ptrace.SpanSlice{}}
}

// Span appends a new span under the resource named service.
func (b *Builder) Span(service string) ptrace.Span {
	spans, ok := b.scopes[service]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(genai.AttrServiceName, service)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(metadata.ScopeName)
		spans = ss.Spans()
		b.scopes[service] = spans
	}
	return spans.AppendEmpty()
}

// Traces returns what was built.
func (b *Builder) Traces() ptrace.Traces { return b.td }

// Len is the number of spans built so far.
func (b *Builder) Len() int { return b.td.SpanCount() }
