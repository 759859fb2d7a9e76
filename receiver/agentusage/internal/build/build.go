// Package build makes the contract's spans (docs/contract.md) from records: the one
// place that decides a span's name, kind, status and contract attributes, for every
// face of the receiver.
package build

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/metadata"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// maxStatusMessage bounds the error message kept on a span: a vendor may send a whole
// traceback.
const maxStatusMessage = 512

// Spans collects spans into one ptrace.Traces, one ResourceSpans per service name.
type Spans struct {
	td     ptrace.Traces
	scopes map[string]ptrace.SpanSlice
}

// New returns an empty collection.
func New() *Spans {
	return &Spans{td: ptrace.NewTraces(), scopes: map[string]ptrace.SpanSlice{}}
}

// Add appends the span of r under the resource named r.Service.
func (b *Spans) Add(r *record.Record) {
	spans, ok := b.scopes[r.Service]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(genai.AttrServiceName, r.Service)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(metadata.ScopeName)
		spans = ss.Spans()
		b.scopes[r.Service] = spans
	}
	s := spans.AppendEmpty()
	s.SetTraceID(r.TraceID)
	s.SetSpanID(r.SpanID)
	s.SetParentSpanID(r.ParentSpanID)
	start, end := r.Start, r.End
	if start.IsZero() {
		start = end
	}
	if end.IsZero() || end.Before(start) {
		end = start
	}
	s.SetStartTimestamp(timestamps.Timestamp(start))
	s.SetEndTimestamp(timestamps.Timestamp(end))
	s.Attributes().EnsureCapacity(attrCap(r.Kind))
	Write(s, r)
}

// Traces returns what was built.
func (b *Spans) Traces() ptrace.Traces { return b.td }

// Len is the number of spans built so far.
func (b *Spans) Len() int { return b.td.SpanCount() }

// attrCap is about the number of attributes a span of kind k gets, so its map grows
// once.
func attrCap(k record.Kind) int {
	if k == record.ModelCall {
		return 16
	}
	return 8
}

// Write sets on s the name, kind, status and contract attributes r describes. Ids and
// times are left alone (Add sets them; a face rewriting the emitter's own span keeps
// its own). It only puts keys, never removes one, so the emitter's other attributes
// stay; a field r leaves empty writes nothing.
func Write(s ptrace.Span, r *record.Record) {
	a := s.Attributes()
	putStr := func(k, v string) {
		if v != "" {
			a.PutStr(k, v)
		}
	}
	putStr(genai.AttrConversationID, r.ThreadID)
	putStr(genai.AttrRunID, r.RunID)
	putStr(genai.AttrCaller, r.Caller)
	putStr(genai.AttrEndUserID, r.UserID)
	putStr(genai.AttrLSDottedOrder, r.LangSmithPlacement)
	putStr(genai.AttrLSSessionName, r.LangSmithProject)
	if r.Failed {
		s.Status().SetCode(ptrace.StatusCodeError)
		s.Status().SetMessage(Truncate(r.Error, maxStatusMessage))
		a.PutStr(genai.AttrErrorType, ErrorType(r.Error))
	}
	kind := r.SpanKind
	switch r.Kind {
	case record.ModelCall:
		op := r.Operation
		if op == "" {
			op = genai.OpChat
		}
		model := r.RequestModel
		if model == "" {
			model = r.ResponseModel
		}
		s.SetName(genai.SpanName(op, model))
		if kind == ptrace.SpanKindUnspecified {
			kind = ptrace.SpanKindClient
		}
		a.PutStr(genai.AttrOperationName, op)
		putStr(genai.AttrProviderName, r.Provider)
		putStr(genai.AttrRequestModel, r.RequestModel)
		putStr(genai.AttrResponseModel, r.ResponseModel)
		if r.HasUsage {
			genai.PutUsage(a, r.Usage)
			if r.CacheCreation1h > 0 {
				a.PutInt(genai.AttrUsageCacheCreat1h, r.CacheCreation1h)
			}
		}
		if len(r.ResponseToolCallIDs) > 0 {
			genai.PutStrings(a, genai.AttrResponseToolCallIDs, r.ResponseToolCallIDs)
		}
	case record.ToolCall:
		s.SetName(genai.SpanName(genai.OpExecuteTool, r.Name))
		a.PutStr(genai.AttrOperationName, genai.OpExecuteTool)
		a.PutStr(genai.AttrToolName, r.Name)
		toolType := r.ToolType
		if toolType == "" {
			toolType = genai.ToolTypeFunction
		}
		a.PutStr(genai.AttrToolType, toolType)
		putStr(genai.AttrToolCallID, r.ToolCallID)
		putStr(genai.AttrSubagentStatus, r.SubagentStatus)
	case record.AgentRun:
		s.SetName(genai.SpanName(genai.OpInvokeAgent, r.Name))
		a.PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
		a.PutStr(genai.AttrAgentName, r.Name)
		putStr(genai.AttrAgentID, r.AgentID)
		putStr(genai.AttrToolCallID, r.ToolCallID)
	default:
		s.SetName(r.Name)
	}
	if kind == ptrace.SpanKindUnspecified {
		kind = ptrace.SpanKindInternal
	}
	s.SetKind(kind)
}

// ErrorType derives error.type from an error string: the exception class when the
// string starts with one ("ValueError('x')", "TimeoutError: x"), else "_OTHER" as semconv says.
func ErrorType(msg string) string {
	end := strings.IndexAny(msg, "(: \n")
	if end <= 0 {
		end = len(msg)
	}
	head := msg[:end]
	if head == "" || len(head) > 100 {
		return "_OTHER"
	}
	for i, r := range head {
		ok := r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return "_OTHER"
		}
	}
	if head[0] < 'A' || head[0] > 'Z' {
		return "_OTHER"
	}
	return head
}

// Truncate cuts s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
