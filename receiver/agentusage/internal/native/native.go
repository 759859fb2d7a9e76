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
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
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
				errs = append(errs, fielderr.New(key, "is required"))
			}
			return ""
		}
		s, ok := v.(string)
		if !ok {
			errs = append(errs, fielderr.New(key, "must be a string"))
			return ""
		}
		if required && s == "" {
			errs = append(errs, fielderr.New(key, "must not be empty"))
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
			errs = append(errs, fielderr.New(key, "must be a non-negative integer"))
			return 0
		}
		i, err := n.Int64()
		if err != nil || i < 0 {
			errs = append(errs, fielderr.New(key, "must be a non-negative integer, got %s", n))
			return 0
		}
		return i
	}
	tm := func(key string) time.Time {
		v, ok := m[key]
		if !ok || v == nil {
			return time.Time{}
		}
		t, err := timestamps.ParseTime(v)
		if err != nil {
			errs = append(errs, fielderr.New(key, "%v", err))
		}
		return t
	}
	r.TraceID = str("trace_id", false)
	if r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID) {
		errs = append(errs, fielderr.New("trace_id", "must be 32 hex digits or a UUID"))
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
			errs = append(errs, fielderr.New("response_tool_call_ids", "must be an array of strings"))
		}
		for i, e := range arr {
			s, ok := e.(string)
			if !ok || s == "" {
				errs = append(errs, fielderr.New(fmt.Sprintf("response_tool_call_ids[%d]", i), "must be a non-empty string"))
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
			errs = append(errs, fielderr.New("total_tokens", "is %d but input_tokens + output_tokens is %d", t, r.Usage.Total()))
		}
	}
	if r.Usage.CacheRead+r.Usage.CacheCreation > r.Usage.Input {
		errs = append(errs, fielderr.New("cache_read_tokens", "cache_read_tokens + cache_creation_tokens (%d) exceed input_tokens (%d); input_tokens includes cached tokens", r.Usage.CacheRead+r.Usage.CacheCreation, r.Usage.Input))
	}
	if r.Usage.Reasoning > r.Usage.Output {
		errs = append(errs, fielderr.New("reasoning_tokens", "reasoning_tokens (%d) exceed output_tokens (%d); output_tokens includes reasoning", r.Usage.Reasoning, r.Usage.Output))
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
	b := build.New()
	for _, r := range Records(recs) {
		b.Add(&r)
	}
	return b.Traces()
}

// Records is Build's span tree as records, in the order Build emits them: per trace
// the root, then each dispatching tool call and its subagent run (by tool call id),
// then the model calls in request order.
func Records(recs []Record) []record.Record {
	byTrace := map[string][]Record{}
	var order []string
	for _, r := range recs {
		k := r.traceKey()
		if _, ok := byTrace[k]; !ok {
			order = append(order, k)
		}
		byTrace[k] = append(byTrace[k], r)
	}
	out := make([]record.Record, 0, len(recs)+1)
	for _, k := range order {
		group := byTrace[k]
		tid := ids.TraceID(k)
		if group[0].TraceID == "" {
			tid = ids.TraceID("agentusage/run\x00" + group[0].RunID)
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
		// base is what every span of the trace shares: ids, thread, run, caller
		base := func(r Record, kind record.Kind, caller string) record.Record {
			return record.Record{Kind: kind, Service: ServiceName, TraceID: tid,
				ThreadID: r.ThreadID, RunID: r.RunID, Caller: caller}
		}
		rootID := ids.SpanID("native/root", k)
		root := base(group[0], record.AgentRun, genai.BucketLeadAgent)
		root.SpanID, root.Start, root.End, root.Name = rootID, first, last, genai.LeadAgentName
		out = append(out, root)

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
			tool := base(rec, record.ToolCall, genai.BucketLeadAgent)
			tool.SpanID = ids.SpanID("native/tool", k+"\x00"+call)
			tool.ParentSpanID = rootID
			tool.Start, tool.End = span[call][0], span[call][1]
			tool.Name, tool.ToolCallID = genai.TaskToolName, call
			out = append(out, tool)

			agent := base(rec, record.AgentRun, rec.Caller)
			agent.SpanID = ids.SpanID("native/subagent", k+"\x00"+call)
			agent.ParentSpanID = tool.SpanID
			agent.Start, agent.End = tool.Start, tool.End
			agent.Name, agent.ToolCallID = subagentName(rec.Caller), call
			agents[call] = agent.SpanID
			out = append(out, agent)
		}

		for _, r := range group {
			c := base(r, record.ModelCall, r.Caller)
			c.SpanID = ids.SpanID("native/record", r.SourceRunID)
			c.ParentSpanID = rootID
			if r.ToolCallID != "" {
				c.ParentSpanID = agents[r.ToolCallID]
			}
			c.Start, c.End = r.Start, r.End
			c.Provider, c.RequestModel, c.ResponseModel = r.Provider, r.ModelName, r.ModelName
			c.Usage, c.HasUsage = r.Usage, r.HasUsage
			c.ResponseToolCallIDs = r.ResponseToolCallIDs
			out = append(out, c)
		}
	}
	return out
}

// subagentName is the name part of a "subagent:<name>" caller, else "subagent".
func subagentName(caller string) string {
	const p = genai.BucketSubagent + ":"
	if len(caller) > len(p) && caller[:len(p)] == p {
		return caller[len(p):]
	}
	return genai.BucketSubagent
}
