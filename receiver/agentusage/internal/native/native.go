// Package native decodes agentmeter's own usage records (POST /v1/usage): the
// RunJournal record shape of DeerFlow (its SubagentTokenCollector and external usage records) plus the ids the
// contract needs, one record per model call. See docs/agentusage.md for the schema.
package native

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
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
// now fills a missing end_time. One decoder serves good and bad bodies alike: the body
// is validated once and each record read in place (rawjson), so a batch with one bad
// record costs what a clean one does, and the messages name every bad field.
func Decode(body []byte, now time.Time) (Result, error) {
	doc, items, err := splitItems(body)
	if err != nil {
		return Result{}, err
	}
	recs := make([]Record, 0, len(items))
	var res Result
	for i, raw := range items {
		r, err := parseRecord(doc, raw, now)
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

func splitItems(body []byte) (*rawjson.Doc, [][]byte, error) {
	doc, ok := rawjson.Parse(body)
	if !ok {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, nil, fmt.Errorf("%w: empty, expected a JSON record, array of records or {\"records\": [...]}", ErrBody)
		}
		return nil, nil, fmt.Errorf("%w: not valid JSON", ErrBody)
	}
	root := doc.Root()
	var items [][]byte
	elems := func(arr []byte) { doc.Elems(arr, func(v []byte) bool { items = append(items, v); return true }) }
	switch {
	case rawjson.IsArray(root):
		elems(root)
	case rawjson.IsObject(root):
		recs, ok := doc.Get(root, "records")
		if !ok {
			return doc, [][]byte{root}, nil
		}
		if !rawjson.IsArray(recs) {
			return nil, nil, fmt.Errorf("%w: records must be an array of objects", ErrBody)
		}
		elems(recs)
	default:
		return nil, nil, fmt.Errorf("%w: expected a JSON object or array", ErrBody)
	}
	return doc, items, nil
}

// The keys of a record, in the order the fields are checked (so the messages of one
// record always come in the same order).
const (
	kTraceID = iota
	kThreadID
	kRunID
	kSourceRunID
	kCaller
	kModelName
	kProvider
	kToolCallID
	kResponseToolCallIDs
	kInputTokens
	kOutputTokens
	kTotalTokens
	kCacheReadTokens
	kCacheCreationTokens
	kReasoningTokens
	kStartTime
	kEndTime
	nKeys
)

var recordKeys = [nKeys]string{"trace_id", "thread_id", "run_id", "source_run_id", "caller", "model_name",
	"provider", "tool_call_id", "response_tool_call_ids", "input_tokens", "output_tokens", "total_tokens",
	"cache_read_tokens", "cache_creation_tokens", "reasoning_tokens", "start_time", "end_time"}

func keyIndex(k []byte) int {
	for i, name := range recordKeys {
		if string(k) == name {
			return i
		}
	}
	return -1
}

func parseRecord(doc *rawjson.Doc, raw []byte, now time.Time) (Record, error) {
	if !rawjson.IsObject(raw) {
		return Record{}, errors.New("record must be a JSON object")
	}
	// the last of duplicate keys wins, as in a decoded map; null is absent
	var vals [nKeys][]byte
	doc.Fields(raw, func(k, v []byte) bool {
		if i := keyIndex(k); i >= 0 {
			vals[i] = v
		}
		return true
	})
	present := func(k int) bool { return !rawjson.IsNull(vals[k]) }
	var r Record
	var errs []error
	str := func(k int, required bool) string {
		key := recordKeys[k]
		if !present(k) {
			if required {
				errs = append(errs, fielderr.New(key, "is required"))
			}
			return ""
		}
		s, ok := rawjson.String(vals[k])
		if !ok {
			errs = append(errs, fielderr.New(key, "must be a string"))
			return ""
		}
		if required && s == "" {
			errs = append(errs, fielderr.New(key, "must not be empty"))
		}
		return s
	}
	count := func(k int) int64 {
		if !present(k) {
			return 0
		}
		key, v := recordKeys[k], vals[k]
		if rawjson.IsString(v) || rawjson.IsObject(v) || rawjson.IsArray(v) || v[0] == 't' || v[0] == 'f' {
			errs = append(errs, fielderr.New(key, "must be a non-negative integer"))
			return 0
		}
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || i < 0 {
			errs = append(errs, fielderr.New(key, "must be a non-negative integer, got %s", v))
			return 0
		}
		return i
	}
	tm := func(k int) time.Time {
		if !present(k) {
			return time.Time{}
		}
		t, err := timestamps.ParseRawTime(vals[k])
		if err != nil {
			errs = append(errs, fielderr.New(recordKeys[k], "%v", err))
		}
		return t
	}
	r.TraceID = str(kTraceID, false)
	if r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID) {
		errs = append(errs, fielderr.New("trace_id", "must be 32 hex digits or a UUID"))
	}
	r.ThreadID = str(kThreadID, false)
	r.RunID = str(kRunID, true)
	r.SourceRunID = str(kSourceRunID, true)
	// the fields that become metric labels are bounded
	label := func(k int) string {
		v := str(k, false)
		if err := fielderr.Label(recordKeys[k], v); err != nil {
			errs = append(errs, err)
		}
		return v
	}
	r.Caller = label(kCaller)
	r.ModelName = label(kModelName)
	r.Provider = label(kProvider)
	r.ToolCallID = str(kToolCallID, false)
	if present(kResponseToolCallIDs) {
		arr := vals[kResponseToolCallIDs]
		if !rawjson.IsArray(arr) {
			errs = append(errs, fielderr.New("response_tool_call_ids", "must be an array of strings"))
		}
		i := 0
		doc.Elems(arr, func(v []byte) bool {
			s, ok := rawjson.String(v)
			if !ok || s == "" {
				errs = append(errs, fielderr.New(fmt.Sprintf("response_tool_call_ids[%d]", i), "must be a non-empty string"))
			} else {
				r.ResponseToolCallIDs = append(r.ResponseToolCallIDs, s)
			}
			i++
			return true
		})
	}
	for k := kInputTokens; k <= kReasoningTokens; k++ {
		if present(k) {
			r.HasUsage = true
		}
	}
	r.Usage = genai.Usage{
		Input:         count(kInputTokens),
		Output:        count(kOutputTokens),
		CacheRead:     count(kCacheReadTokens),
		CacheCreation: count(kCacheCreationTokens),
		Reasoning:     count(kReasoningTokens),
	}
	if present(kTotalTokens) {
		t := count(kTotalTokens)
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
	r.Start = tm(kStartTime)
	r.End = tm(kEndTime)
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
	// A record without a caller is the lead's, unless it names the task call whose
	// subagent made it: then it hangs under that subagent's run and the merge attributes
	// it from there (docs/contract.md), rather than this face pinning it on the lead.
	if r.Caller == "" && r.ToolCallID == "" {
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

		// one execute_tool + invoke_agent pair per dispatching tool call id, spanning its
		// records; the call's first record gives the pair's thread, run and caller
		type dispatch struct {
			first      int // index in group
			start, end time.Time
			agent      pcommon.SpanID
		}
		var dispatches []dispatch
		byCall := map[string]int{} // tool call id → index in dispatches
		var calls []string
		for i, r := range group {
			if r.ToolCallID == "" {
				continue
			}
			j, ok := byCall[r.ToolCallID]
			if !ok {
				byCall[r.ToolCallID] = len(dispatches)
				dispatches = append(dispatches, dispatch{first: i, start: r.Start, end: r.End})
				calls = append(calls, r.ToolCallID)
				continue
			}
			d := &dispatches[j]
			if r.Start.Before(d.start) {
				d.start = r.Start
			}
			if r.End.After(d.end) {
				d.end = r.End
			}
		}
		sort.Strings(calls)
		for _, call := range calls {
			d := &dispatches[byCall[call]]
			rec := group[d.first]
			tool := base(rec, record.ToolCall, genai.BucketLeadAgent)
			tool.SpanID = ids.SpanID("native/tool", k+"\x00"+call)
			tool.ParentSpanID = rootID
			tool.Start, tool.End = d.start, d.end
			tool.Name, tool.ToolCallID = genai.TaskToolName, call
			out = append(out, tool)

			agent := base(rec, record.AgentRun, rec.Caller)
			agent.SpanID = ids.SpanID("native/subagent", k+"\x00"+call)
			agent.ParentSpanID = tool.SpanID
			agent.Start, agent.End = tool.Start, tool.End
			agent.Name, agent.ToolCallID = subagentName(rec.Caller), call
			d.agent = agent.SpanID
			out = append(out, agent)
		}

		for _, r := range group {
			c := base(r, record.ModelCall, r.Caller)
			c.SpanID = ids.SpanID("native/record", r.SourceRunID)
			c.ParentSpanID = rootID
			if r.ToolCallID != "" {
				c.ParentSpanID = dispatches[byCall[r.ToolCallID]].agent
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
