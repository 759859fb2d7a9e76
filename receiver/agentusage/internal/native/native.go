// Package native decodes agentmeter's own usage records (POST /v1/usage): the
// RunJournal record shape of DeerFlow (its SubagentTokenCollector and external usage records) plus the ids the
// contract needs, one record per model call. See docs/agentusage.md for the schema.
package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/spanutil"
)

// ServiceName is the resource service.name of spans built from records.
const ServiceName = "agentusage"

// Record is one model call's usage after validation.
type Record struct {
	TraceID             string
	ThreadID            string
	RunID               string
	SourceRunID         string
	Caller              string
	ModelName           string
	Provider            string
	Usage               genai.Usage
	HasUsage            bool // false: the call reported no usage, so the span gets none (docs/contract.md#usage)
	ToolCallID          string
	ResponseToolCallIDs []string
	Start, End          time.Time
}

// ItemError is one rejected record.
type ItemError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

// Result is the outcome of decoding one request body.
type Result struct {
	Traces   ptrace.Traces
	Accepted int
	Errors   []ItemError
}

// ErrBody is a request-level decoding error (not JSON, wrong top-level shape).
var ErrBody = errors.New("request body")

// Decode parses a body holding one record, an array of records, or {"records": [...]}.
// Each bad record is reported by index and skipped; the good ones still become spans.
// now fills a missing end_time.
func Decode(body []byte, now time.Time) (Result, error) {
	if recs, err := decodeFast(body, now); err == nil {
		return Result{Traces: Build(recs), Accepted: len(recs)}, nil
	}
	items, err := splitItems(body)
	if err != nil {
		return Result{}, err
	}
	var recs []Record
	var res Result
	for i, raw := range items {
		r, err := parseRecord(raw, now)
		if err != nil {
			res.Errors = append(res.Errors, ItemError{Index: i, Message: err.Error()})
			continue
		}
		recs = append(recs, r)
	}
	res.Accepted = len(recs)
	res.Traces = Build(recs)
	return res, nil
}

func splitItems(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty, expected a JSON record, array of records or {\"records\": [...]}", ErrBody)
	}
	switch body[0] {
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, fmt.Errorf("%w: not a JSON array of records: %v", ErrBody, err)
		}
		return items, nil
	case '{':
		var env map[string]json.RawMessage
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, fmt.Errorf("%w: not valid JSON: %v", ErrBody, err)
		}
		if recs, ok := env["records"]; ok {
			var items []json.RawMessage
			if err := json.Unmarshal(recs, &items); err != nil {
				return nil, fmt.Errorf("%w: records must be an array of objects", ErrBody)
			}
			return items, nil
		}
		return []json.RawMessage{body}, nil
	}
	return nil, fmt.Errorf("%w: expected a JSON object or array", ErrBody)
}

func parseRecord(raw json.RawMessage, now time.Time) (Record, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return Record{}, errors.New("record must be a JSON object")
	}
	var r Record
	var errs []error
	str := func(key string, required bool) string {
		v, ok := m[key]
		if !ok || v == nil {
			if required {
				errs = append(errs, spanutil.Errorf(key, "is required"))
			}
			return ""
		}
		s, ok := v.(string)
		if !ok {
			errs = append(errs, spanutil.Errorf(key, "must be a string"))
			return ""
		}
		if required && s == "" {
			errs = append(errs, spanutil.Errorf(key, "must not be empty"))
		}
		return s
	}
	count := func(key string) int64 {
		v, ok := m[key]
		if !ok || v == nil {
			return 0
		}
		n, ok := v.(json.Number)
		if !ok {
			errs = append(errs, spanutil.Errorf(key, "must be a non-negative integer"))
			return 0
		}
		i, err := n.Int64()
		if err != nil || i < 0 {
			errs = append(errs, spanutil.Errorf(key, "must be a non-negative integer, got %s", n))
			return 0
		}
		return i
	}
	tm := func(key string) time.Time {
		v, ok := m[key]
		if !ok || v == nil {
			return time.Time{}
		}
		t, err := spanutil.ParseTime(v)
		if err != nil {
			errs = append(errs, spanutil.Errorf(key, "%v", err))
		}
		return t
	}
	r.TraceID = str("trace_id", false)
	if r.TraceID != "" && !spanutil.IsUUIDOrHex(r.TraceID) {
		errs = append(errs, spanutil.Errorf("trace_id", "must be 32 hex digits or a UUID"))
	}
	r.ThreadID = str("thread_id", false)
	r.RunID = str("run_id", true)
	r.SourceRunID = str("source_run_id", true)
	r.Caller = str("caller", false)
	r.ModelName = str("model_name", false)
	r.Provider = str("provider", false)
	r.ToolCallID = str("tool_call_id", false)
	if v, ok := m["response_tool_call_ids"]; ok && v != nil {
		arr, ok := v.([]any)
		if !ok {
			errs = append(errs, spanutil.Errorf("response_tool_call_ids", "must be an array of strings"))
		}
		for i, e := range arr {
			s, ok := e.(string)
			if !ok || s == "" {
				errs = append(errs, spanutil.Errorf(fmt.Sprintf("response_tool_call_ids[%d]", i), "must be a non-empty string"))
				continue
			}
			r.ResponseToolCallIDs = append(r.ResponseToolCallIDs, s)
		}
	}
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"} {
		if v, ok := m[k]; ok && v != nil {
			r.HasUsage = true
		}
	}
	r.Usage = genai.Usage{
		Input:         count("input_tokens"),
		Output:        count("output_tokens"),
		CacheRead:     count("cache_read_tokens"),
		CacheCreation: count("cache_creation_tokens"),
		Reasoning:     count("reasoning_tokens"),
	}
	if total, has := m["total_tokens"]; has && total != nil {
		t := count("total_tokens")
		if len(errs) == 0 && t != r.Usage.Total() {
			errs = append(errs, spanutil.Errorf("total_tokens", "is %d but input_tokens + output_tokens is %d", t, r.Usage.Total()))
		}
	}
	if r.Usage.CacheRead+r.Usage.CacheCreation > r.Usage.Input {
		errs = append(errs, spanutil.Errorf("cache_read_tokens", "cache_read_tokens + cache_creation_tokens (%d) exceed input_tokens (%d); input_tokens includes cached tokens", r.Usage.CacheRead+r.Usage.CacheCreation, r.Usage.Input))
	}
	if r.Usage.Reasoning > r.Usage.Output {
		errs = append(errs, spanutil.Errorf("reasoning_tokens", "reasoning_tokens (%d) exceed output_tokens (%d); output_tokens includes reasoning", r.Usage.Reasoning, r.Usage.Output))
	}
	r.Start = tm("start_time")
	r.End = tm("end_time")
	if err := errors.Join(errs...); err != nil {
		return Record{}, err
	}
	finish(&r, now)
	return r, nil
}

// finish fills the defaults of a valid record.
func finish(r *Record, now time.Time) {
	if r.End.IsZero() {
		r.End = now
	}
	if r.Start.IsZero() || r.Start.After(r.End) {
		r.Start = r.End
	}
	if r.Caller == "" {
		r.Caller = genai.BucketLeadAgent
	}
}

// traceKey identifies the trace of a record: its trace_id, else its run.
func (r Record) traceKey() string {
	if r.TraceID != "" {
		return r.TraceID
	}
	return "run:" + r.RunID
}

// Build turns records into the contract's span tree. Per trace (trace_id, else run_id):
// one `invoke_agent lead_agent` root; a record with tool_call_id X (a model call made
// inside the subagent dispatched by task call X) hangs under `execute_tool task`
// (gen_ai.tool.call.id=X) → `invoke_agent <subagent>`, so subagentmerge finds the
// subtree; other records are `chat` spans under the root. Every id is a hash of stable
// record fields, so resending a record (or a whole batch) reproduces the same spans;
// the structural spans are re-emitted with each request that needs them, with the same
// ids (exporters upsert by id).
func Build(recs []Record) ptrace.Traces {
	b := spanutil.NewBuilder()
	byTrace := map[string][]Record{}
	var order []string
	for _, r := range recs {
		k := r.traceKey()
		if _, ok := byTrace[k]; !ok {
			order = append(order, k)
		}
		byTrace[k] = append(byTrace[k], r)
	}
	for _, k := range order {
		group := byTrace[k]
		tid := spanutil.TraceID(k)
		if group[0].TraceID == "" {
			tid = spanutil.TraceID("agentusage/run\x00" + group[0].RunID)
		}
		first, last := group[0].Start, group[0].End
		for _, r := range group {
			if r.Start.Before(first) {
				first = r.Start
			}
			if r.End.After(last) {
				last = r.End
			}
		}
		common := func(s ptrace.Span, r Record, caller string) {
			a := s.Attributes()
			if r.ThreadID != "" {
				a.PutStr(genai.AttrConversationID, r.ThreadID)
			}
			a.PutStr(genai.AttrRunID, r.RunID)
			a.PutStr(genai.AttrCaller, caller)
		}
		rootID := spanutil.SpanID("native/root", k)
		root := b.Span(ServiceName)
		root.SetTraceID(tid)
		root.SetSpanID(rootID)
		root.SetName(genai.SpanName(genai.OpInvokeAgent, genai.LeadAgentName))
		root.SetKind(ptrace.SpanKindInternal)
		root.SetStartTimestamp(spanutil.Timestamp(first))
		root.SetEndTimestamp(spanutil.Timestamp(last))
		common(root, group[0], genai.BucketLeadAgent)
		root.Attributes().PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
		root.Attributes().PutStr(genai.AttrAgentName, genai.LeadAgentName)

		// one execute_tool + invoke_agent pair per dispatching tool call id
		agents := map[string]pcommon.SpanID{}
		var calls []string
		span := map[string][2]time.Time{}
		for _, r := range group {
			if r.ToolCallID == "" {
				continue
			}
			w, ok := span[r.ToolCallID]
			if !ok {
				calls = append(calls, r.ToolCallID)
				w = [2]time.Time{r.Start, r.End}
			}
			if r.Start.Before(w[0]) {
				w[0] = r.Start
			}
			if r.End.After(w[1]) {
				w[1] = r.End
			}
			span[r.ToolCallID] = w
		}
		sort.Strings(calls)
		for _, call := range calls {
			var rec Record
			for _, r := range group {
				if r.ToolCallID == call {
					rec = r
					break
				}
			}
			name := subagentName(rec.Caller)
			toolID := spanutil.SpanID("native/tool", k+"\x00"+call)
			tool := b.Span(ServiceName)
			tool.SetTraceID(tid)
			tool.SetSpanID(toolID)
			tool.SetParentSpanID(rootID)
			tool.SetName(genai.SpanName(genai.OpExecuteTool, genai.TaskToolName))
			tool.SetKind(ptrace.SpanKindInternal)
			tool.SetStartTimestamp(spanutil.Timestamp(span[call][0]))
			tool.SetEndTimestamp(spanutil.Timestamp(span[call][1]))
			common(tool, rec, genai.BucketLeadAgent)
			ta := tool.Attributes()
			ta.PutStr(genai.AttrOperationName, genai.OpExecuteTool)
			ta.PutStr(genai.AttrToolName, genai.TaskToolName)
			ta.PutStr(genai.AttrToolCallID, call)
			ta.PutStr(genai.AttrToolType, genai.ToolTypeFunction)

			agentID := spanutil.SpanID("native/subagent", k+"\x00"+call)
			ag := b.Span(ServiceName)
			ag.SetTraceID(tid)
			ag.SetSpanID(agentID)
			ag.SetParentSpanID(toolID)
			ag.SetName(genai.SpanName(genai.OpInvokeAgent, name))
			ag.SetKind(ptrace.SpanKindInternal)
			ag.SetStartTimestamp(spanutil.Timestamp(span[call][0]))
			ag.SetEndTimestamp(spanutil.Timestamp(span[call][1]))
			common(ag, rec, rec.Caller)
			aa := ag.Attributes()
			aa.PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
			aa.PutStr(genai.AttrAgentName, name)
			aa.PutStr(genai.AttrToolCallID, call)
			agents[call] = agentID
		}

		for _, r := range group {
			s := b.Span(ServiceName)
			s.SetTraceID(tid)
			s.SetSpanID(spanutil.SpanID("native/record", r.SourceRunID))
			if r.ToolCallID != "" {
				s.SetParentSpanID(agents[r.ToolCallID])
			} else {
				s.SetParentSpanID(rootID)
			}
			s.SetName(genai.SpanName(genai.OpChat, r.ModelName))
			s.SetKind(ptrace.SpanKindClient)
			s.SetStartTimestamp(spanutil.Timestamp(r.Start))
			s.SetEndTimestamp(spanutil.Timestamp(r.End))
			common(s, r, r.Caller)
			a := s.Attributes()
			a.PutStr(genai.AttrOperationName, genai.OpChat)
			if r.Provider != "" {
				a.PutStr(genai.AttrProviderName, r.Provider)
			}
			if r.ModelName != "" {
				a.PutStr(genai.AttrRequestModel, r.ModelName)
				a.PutStr(genai.AttrResponseModel, r.ModelName)
			}
			if r.HasUsage {
				genai.PutUsage(a, r.Usage)
			}
			if len(r.ResponseToolCallIDs) > 0 {
				genai.PutStrings(a, genai.AttrResponseToolCallIDs, r.ResponseToolCallIDs)
			}
		}
	}
	return b.Traces()
}

// subagentName is the name part of a "subagent:<name>" caller, else "subagent".
func subagentName(caller string) string {
	const p = genai.BucketSubagent + ":"
	if len(caller) > len(p) && caller[:len(p)] == p {
		return caller[len(p):]
	}
	return genai.BucketSubagent
}
