// Package langfuse decodes what the Langfuse SDKs send: OTLP/HTTP spans carrying
// langfuse.* attributes (POST /api/public/otel/v1/traces, SDK v4+) and the legacy
// batch of create/update events (POST /api/public/ingestion, SDK v2/v3), and maps both
// to the contract's spans.
package langfuse

import (
	"errors"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// ErrBody is a request-level decoding error.
var ErrBody = errors.New("request body")

// DecodeOTLP parses an OTLP/HTTP export request (protobuf or JSON, already
// decompressed) and maps langfuse.* attributes onto the contract in place. Like
// Langfuse, a body that does not parse is refused as a whole.
func DecodeOTLP(contentType string, body []byte) (ptrace.Traces, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	req := ptraceotlp.NewExportRequest()
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		if err := req.UnmarshalProto(body); err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: invalid OTLP protobuf: %v", ErrBody, err)
		}
	case "application/json":
		if err := req.UnmarshalJSON(body); err != nil {
			return ptrace.Traces{}, fmt.Errorf("%w: invalid OTLP JSON: %v", ErrBody, err)
		}
	default:
		return ptrace.Traces{}, fmt.Errorf("%w: Content-Type must be application/x-protobuf or application/json, got %q", ErrBody, contentType)
	}
	td := req.Traces()
	if err := mapOTLP(td); err != nil {
		return ptrace.Traces{}, fmt.Errorf("%w: %w", ErrBody, err)
	}
	return td, nil
}

// Langfuse attribute keys read by mapOTLP (Langfuse's own names; see
// docs/langfuse.md#mapping).
const (
	lfObsType       = "langfuse.observation.type"
	lfModel         = "langfuse.observation.model.name"
	lfUsageDetails  = "langfuse.observation.usage_details"
	lfObsMetadata   = "langfuse.observation.metadata"
	lfObsMetaPrefix = "langfuse.observation.metadata."
	lfObsOutput     = "langfuse.observation.output"
	lfObsInput      = "langfuse.observation.input"
	lfTraceInput    = "langfuse.trace.input"
	lfTraceOutput   = "langfuse.trace.output"
	lfSessionID     = "langfuse.session.id"
	lfUserID        = "langfuse.user.id"
	lfTraceName     = "langfuse.trace.name"
	lfTraceMetaPref = "langfuse.trace.metadata."
	otelSessionID   = "session.id"
	otelUserID      = "user.id"
)

// mapOTLP rewrites Langfuse-SDK spans into contract spans:
//   - observation type generation → chat (name "chat <model>", CLIENT), agent →
//     invoke_agent, tool → execute_tool, a LangChain/LangGraph agent's own run →
//     invoke_agent; spans that already carry gen_ai.operation.name keep it;
//   - langfuse.observation.model.name → gen_ai.request.model / response.model;
//   - langfuse.observation.usage_details (Langfuse's exclusive buckets: input without
//     cache, output without reasoning) → gen_ai.usage.* inclusive (docs/contract.md#usage);
//   - session → gen_ai.conversation.id, user → enduser.id, copied to every span of the
//     trace (the SDK sets them on some spans only);
//   - metadata caller / tool_call_id / run_id / response_tool_call_ids → agentmeter keys;
//     tool call ids a generation's output asked for → agentmeter.response.tool_call_ids;
//   - prompt and completion content (langfuse.*.input/output) is dropped: the contract
//     keeps content off unless the emitter opts in with gen_ai.*.messages.
//
// Each span is decided into a record (what the emitter already set under a contract key
// wins) and internal/build writes the record back onto the span. Span and trace ids
// and the emitter's other attributes are kept: they are the client's own, so a resend
// is the same span.
//
// A request with a label-bound value (a model, provider, caller, tool or agent name, or
// a resource's service.name) longer than genai.MaxLabelBytes is refused whole, the
// error naming the span and the key, before anything is rewritten.
func mapOTLP(td ptrace.Traces) error {
	if err := checkServiceNames(td); err != nil {
		return err
	}
	session := map[pcommon.TraceID]string{}
	user := map[pcommon.TraceID]string{}
	// tool observations of the request: a LangChain run directly under one is a subagent
	tools := map[pcommon.SpanID]bool{}
	spans := make([]ptrace.Span, 0, td.SpanCount())
	for s := range spaniter.All(td) {
		spans = append(spans, s)
		a := s.Attributes()
		if v := genai.FirstStringAttr(a, lfSessionID, otelSessionID, genai.AttrConversationID); v != "" {
			session[s.TraceID()] = v
		}
		if v := genai.FirstStringAttr(a, lfUserID, otelUserID, genai.AttrEndUserID); v != "" {
			user[s.TraceID()] = v
		}
		if genai.StringAttr(a, genai.AttrOperationName) == genai.OpExecuteTool || strings.EqualFold(genai.StringAttr(a, lfObsType), "tool") {
			tools[s.SpanID()] = true
		}
	}
	pooled := recordsPool.Get().(*[]record.Record)
	recs := (*pooled)[:0]
	for _, s := range spans {
		recs = append(recs, decideSpan(s, session[s.TraceID()], user[s.TraceID()], tools[s.ParentSpanID()]))
	}
	inheritCallers(spans, recs)
	for i := range recs {
		if err := recs[i].CheckLabels(); err != nil {
			clear(recs)
			*pooled = recs[:0]
			recordsPool.Put(pooled)
			return fmt.Errorf("%s: %w", spanPath(td, i), err)
		}
	}
	for i, s := range spans {
		build.Write(s, &recs[i])
		a := s.Attributes()
		for _, k := range []string{lfObsInput, lfObsOutput, lfTraceInput, lfTraceOutput} {
			a.Remove(k)
		}
	}
	clear(recs) // keep no request's strings alive in the pool
	*pooled = recs[:0]
	recordsPool.Put(pooled)
	return nil
}

// checkServiceNames refuses a resource whose service.name (a metric label through the
// tokenmetrics connector's resource attributes) is longer than genai.MaxLabelBytes.
func checkServiceNames(td ptrace.Traces) error {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		if v, ok := rss.At(i).Resource().Attributes().Get(genai.AttrServiceName); ok {
			field := "resourceSpans[" + strconv.Itoa(i) + "].resource." + genai.AttrServiceName
			if err := fielderr.Label(field, v.AsString()); err != nil {
				return err
			}
		}
	}
	return nil
}

// spanPath names the n-th span of td (in spaniter.All's order) as the OTLP JSON
// encoding does.
func spanPath(td ptrace.Traces, n int) string {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			if k := sss.At(j).Spans().Len(); n >= k {
				n -= k
				continue
			}
			return "resourceSpans[" + strconv.Itoa(i) + "].scopeSpans[" + strconv.Itoa(j) + "].spans[" + strconv.Itoa(n) + "]"
		}
	}
	return "spans"
}

// recordsPool recycles mapOTLP's records: a request's records only live until they are
// written back onto its spans, and allocating them for every request would be about a
// tenth of the face's memory.
var recordsPool = sync.Pool{New: func() any { return new([]record.Record) }}

// inheritCallers gives every record a run id (its own, else the trace's in the
// request, else the trace id) and a caller when the request says one: its own, else
// its nearest ancestor's in the request (a subagent's agent run under a tool call is
// subagent:<name>). A span whose chain says none keeps none: the SDK exports a long run
// in several batches (a subagent's spans end, and leave, before its task span), so "no
// caller in this request" is not "the lead's"; subagentmerge attributes it from the
// whole trace, and an uncalled span counts as the lead's.
func inheritCallers(spans []ptrace.Span, recs []record.Record) {
	type node struct {
		parent pcommon.SpanID
		rec    *record.Record
	}
	nodes := make(map[pcommon.SpanID]node, len(spans))
	for i, s := range spans {
		nodes[s.SpanID()] = node{s.ParentSpanID(), &recs[i]}
	}
	var resolve func(id pcommon.SpanID, depth int) string
	resolve = func(id pcommon.SpanID, depth int) string {
		n, ok := nodes[id]
		if !ok || depth > 256 {
			return ""
		}
		if n.rec.Caller != "" {
			return n.rec.Caller
		}
		if n.rec.Kind == record.AgentRun {
			if p, ok := nodes[n.parent]; ok && p.rec.Kind == record.ToolCall {
				n.rec.Caller = genai.SubagentCaller(n.rec.Name)
				return n.rec.Caller
			}
		}
		n.rec.Caller = resolve(n.parent, depth+1)
		return n.rec.Caller
	}
	runs := map[pcommon.TraceID]string{}
	for i, s := range spans {
		if r := recs[i].RunID; r != "" {
			runs[s.TraceID()] = r
		}
	}
	for i, s := range spans {
		resolve(s.SpanID(), 0)
		if recs[i].RunID == "" {
			r := runs[s.TraceID()]
			if r == "" {
				r = s.TraceID().String()
			}
			recs[i].RunID = r
		}
	}
}
