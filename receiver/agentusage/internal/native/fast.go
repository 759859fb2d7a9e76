package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// typedRecord is the record decoded straight into Go types: the fast path for the
// common, well-formed body. Any type mismatch sends the whole body to the generic
// path, which names every bad field of every record.
type typedRecord struct {
	TraceID             *string         `json:"trace_id"`
	ThreadID            *string         `json:"thread_id"`
	RunID               *string         `json:"run_id"`
	SourceRunID         *string         `json:"source_run_id"`
	Caller              *string         `json:"caller"`
	ModelName           *string         `json:"model_name"`
	Provider            *string         `json:"provider"`
	InputTokens         *int64          `json:"input_tokens"`
	OutputTokens        *int64          `json:"output_tokens"`
	TotalTokens         *int64          `json:"total_tokens"`
	CacheReadTokens     *int64          `json:"cache_read_tokens"`
	CacheCreationTokens *int64          `json:"cache_creation_tokens"`
	ReasoningTokens     *int64          `json:"reasoning_tokens"`
	ToolCallID          *string         `json:"tool_call_id"`
	ResponseToolCallIDs []string        `json:"response_tool_call_ids"`
	StartTime           json.RawMessage `json:"start_time"`
	EndTime             json.RawMessage `json:"end_time"`
}

var errSlowPath = errors.New("needs the generic decoder")

// decodeFast decodes a well-formed body in one pass. It returns errSlowPath for any
// body it cannot take whole (a type mismatch, a failed check, a non-object item), so
// error reporting stays in one place.
func decodeFast(body []byte, now time.Time) ([]Record, error) {
	body = bytes.TrimSpace(body)
	var items []typedRecord
	switch {
	case len(body) > 0 && body[0] == '[':
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, errSlowPath
		}
	case len(body) > 0 && body[0] == '{':
		var env struct {
			Records *[]typedRecord `json:"records"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, errSlowPath
		}
		if env.Records == nil {
			return nil, errSlowPath // a single record: rare, let the generic path do it
		}
		items = *env.Records
	default:
		return nil, errSlowPath
	}
	recs := make([]Record, 0, len(items))
	for i := range items {
		r, ok := items[i].record(now)
		if !ok {
			return nil, errSlowPath
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (t *typedRecord) record(now time.Time) (Record, bool) {
	if t.RunID == nil || *t.RunID == "" || t.SourceRunID == nil || *t.SourceRunID == "" {
		return Record{}, false
	}
	r := Record{
		TraceID: str(t.TraceID), ThreadID: str(t.ThreadID), RunID: *t.RunID, SourceRunID: *t.SourceRunID,
		Caller: str(t.Caller), ModelName: str(t.ModelName), Provider: str(t.Provider), ToolCallID: str(t.ToolCallID),
		ResponseToolCallIDs: t.ResponseToolCallIDs,
	}
	if r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID) {
		return Record{}, false
	}
	for _, id := range r.ResponseToolCallIDs {
		if id == "" {
			return Record{}, false
		}
	}
	var bad bool
	n := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		r.HasUsage = true
		if *p < 0 {
			bad = true
		}
		return *p
	}
	r.Usage = genai.Usage{
		Input: n(t.InputTokens), Output: n(t.OutputTokens), CacheRead: n(t.CacheReadTokens),
		CacheCreation: n(t.CacheCreationTokens), Reasoning: n(t.ReasoningTokens),
	}
	if t.TotalTokens != nil && n(t.TotalTokens) != r.Usage.Total() {
		bad = true
	}
	if bad || r.Usage.CacheRead+r.Usage.CacheCreation > r.Usage.Input || r.Usage.Reasoning > r.Usage.Output {
		return Record{}, false
	}
	var err error
	if r.Start, err = timestamps.ParseRawTime(t.StartTime); err != nil {
		return Record{}, false
	}
	if r.End, err = timestamps.ParseRawTime(t.EndTime); err != nil {
		return Record{}, false
	}
	finish(&r, now)
	return r, true
}
