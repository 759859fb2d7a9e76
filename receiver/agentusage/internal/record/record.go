// Package record is the one intermediate form every face of the receiver decodes into:
// a model call, a tool call, an agent run, or a plain step that only keeps the tree.
// A face decides what the vendor's payload means (which run is an agent, which call a
// tool answered, who the caller is); internal/build alone decides what a contract span
// carries, so the faces cannot drift apart in how they write it.
package record

import (
	"encoding/json"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
)

// Kind is what a record describes.
type Kind uint8

const (
	// Step is a run with no contract meaning (a chain, a graph node, a span the
	// emitter named itself): a plain span under its own name, keeping the tree.
	Step Kind = iota
	// ModelCall is one call to a model: the only kind whose usage is counted.
	ModelCall
	// ToolCall is one tool execution; a task tool call dispatches a subagent.
	ToolCall
	// AgentRun is one run of an agent (the lead, or a subagent under a tool call).
	AgentRun
)

// Record is one span-to-be. Fields a kind does not use stay empty.
type Record struct {
	Kind Kind
	// Service is the resource's service.name.
	Service string

	TraceID      pcommon.TraceID
	SpanID       pcommon.SpanID
	ParentSpanID pcommon.SpanID // empty for a root
	Start, End   time.Time
	// SpanKind is the emitter's span kind; unspecified lets the builder choose (CLIENT
	// for a model call, INTERNAL otherwise).
	SpanKind ptrace.SpanKind

	// Name is the emitter's own name: a step's span name, a tool's name, an agent's
	// name. A model call is named after its model.
	Name string

	// What run the span belongs to and who caused it (docs/contract.md).
	ThreadID string
	RunID    string
	Caller   string // "" when the emitter did not say: the merge attributes it
	UserID   string

	// Failed: the emitter reported an error; Error is its message (may be empty).
	Failed bool
	Error  string

	// Model call.
	Operation     string // gen_ai.operation.name; "" is chat
	Provider      string
	RequestModel  string
	ResponseModel string
	// Usage is the call's own usage, normalised (input includes cache, output includes
	// reasoning); HasUsage false means the call reported none and the span gets none.
	Usage    genai.Usage
	HasUsage bool
	// CacheCreation1h is the part of Usage.CacheCreation written with a one-hour
	// lifetime (priced at its own rate).
	CacheCreation1h int64
	// ResponseToolCallIDs are the tool calls the response asked for, in order.
	ResponseToolCallIDs []string

	// Tool call: ToolCallID is the provider's id of the call it answered. Agent run:
	// ToolCallID is the task call that dispatched it (a subagent).
	ToolCallID     string
	ToolType       string // "" is function
	SubagentStatus string
	// AgentID is the emitter's id of an agent run.
	AgentID string

	// LangSmithPlacement is the emitter's LangSmith placement of its run (a LangSmith
	// SDK's dotted_order), when it addresses this run: the span carries it
	// (langsmith.span.dotted_order), so the collector sends the run to LangSmith as soon
	// as it arrives, under the SDK's own run ids.
	LangSmithPlacement string
	// LangSmithProject is the LangSmith project the emitter sent the run to (a LangSmith
	// SDK's session_name): the span carries it (langsmith.trace.session_name), so the
	// collector's LangSmith exporter sends the run to that project, as LangSmith would.
	LangSmithProject string
}

// Count reads a non-negative token count from decoded JSON (a number, json.Number or
// numeric string); ok is false for anything else.
func Count(v any) (int64, bool) {
	switch t := v.(type) {
	case float64:
		if t < 0 || t > math.MaxInt64/2 || math.IsNaN(t) {
			return 0, false
		}
		return int64(t), true
	case json.Number:
		if i, err := t.Int64(); err == nil && i >= 0 {
			return i, true
		}
		if f, err := t.Float64(); err == nil && f >= 0 && f < math.MaxInt64/2 {
			return int64(f), true
		}
	case string:
		return Count(json.Number(t))
	}
	return 0, false
}

// CheckLabels refuses a record whose label-bound fields (those a metric can carry as a
// label: service, caller, model, provider, operation, a tool's or an agent's name and
// a tool's type) are longer than genai.MaxLabelBytes. The error names the field by the
// contract key it is written under. A face that knows where each field came from
// checks its own fields as it decodes them; this is the check for a face whose fields
// come from many keys (the OTLP one).
func (r *Record) CheckLabels() error {
	fields := [...]struct{ key, value string }{
		{genai.AttrServiceName, r.Service},
		{genai.AttrCaller, r.Caller},
		{genai.AttrRequestModel, r.RequestModel},
		{genai.AttrResponseModel, r.ResponseModel},
		{genai.AttrProviderName, r.Provider},
		{genai.AttrOperationName, r.Operation},
		{genai.AttrToolType, r.ToolType},
		{nameKey(r.Kind), r.Name},
	}
	for _, f := range fields {
		if f.key == "" {
			continue
		}
		if err := fielderr.Label(f.key, f.value); err != nil {
			return err
		}
	}
	return nil
}

// nameKey is the contract key a record's Name is written under when it can become a
// label: a tool's or an agent's name ("" for other kinds, whose name is a span name).
func nameKey(k Kind) string {
	switch k {
	case ToolCall:
		return genai.AttrToolName
	case AgentRun:
		return genai.AttrAgentName
	}
	return ""
}
