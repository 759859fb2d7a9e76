package langsmith

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// typedRun is a run decoded straight into Go types: the fast path for well-formed
// /runs/batch bodies. Inputs stay raw (see Run.RawInputs); events and serialized are
// not decoded. Anything unexpected sends the body to the generic path, which names
// every bad field.
type typedRun struct {
	ID          *string         `json:"id"`
	TraceID     *string         `json:"trace_id"`
	DottedOrder *string         `json:"dotted_order"`
	ParentRunID *string         `json:"parent_run_id"`
	Name        *string         `json:"name"`
	RunType     *string         `json:"run_type"`
	SessionName *string         `json:"session_name"`
	StartTime   json.RawMessage `json:"start_time"`
	EndTime     json.RawMessage `json:"end_time"`
	Inputs      json.RawMessage `json:"inputs"`
	Outputs     json.RawMessage `json:"outputs"`
	Extra       json.RawMessage `json:"extra"`
	Error       json.RawMessage `json:"error"`
	Tags        []string        `json:"tags"`
}

var errSlowPath = errors.New("needs the generic decoder")

func decodeBatchFast(body []byte) ([]Op, error) {
	var env struct {
		Post  []typedRun `json:"post"`
		Patch []typedRun `json:"patch"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, errSlowPath
	}
	ops := make([]Op, 0, len(env.Post)+len(env.Patch))
	for _, group := range []struct {
		runs  []typedRun
		patch bool
	}{{env.Post, false}, {env.Patch, true}} {
		for i := range group.runs {
			r, ok := group.runs[i].run(group.patch)
			if !ok {
				return nil, errSlowPath
			}
			ops = append(ops, Op{Patch: group.patch, Run: r})
		}
	}
	return ops, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func rawObject(raw json.RawMessage) (map[string]any, bool) {
	if isNull(raw) {
		return nil, true
	}
	if raw[0] != '{' {
		return nil, false
	}
	var m map[string]any
	return m, json.Unmarshal(raw, &m) == nil
}

func (t *typedRun) run(patch bool) (Run, bool) {
	r := Run{
		ID: deref(t.ID), TraceID: deref(t.TraceID), DottedOrder: deref(t.DottedOrder), ParentRunID: deref(t.ParentRunID),
		Name: deref(t.Name), RunType: deref(t.RunType), SessionName: deref(t.SessionName), Tags: t.Tags, Posted: !patch,
	}
	if !ids.IsUUIDOrHex(r.ID) || (r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID)) {
		return Run{}, false
	}
	var err error
	if r.Start, err = timestamps.ParseRawTime(t.StartTime); err != nil {
		return Run{}, false
	}
	if r.End, err = timestamps.ParseRawTime(t.EndTime); err != nil {
		return Run{}, false
	}
	var ok bool
	if r.Outputs, ok = rawObject(t.Outputs); !ok {
		return Run{}, false
	}
	if r.Extra, ok = rawObject(t.Extra); !ok {
		return Run{}, false
	}
	if !isNull(t.Inputs) {
		if t.Inputs[0] != '{' {
			return Run{}, false
		}
		r.RawInputs = t.Inputs
	}
	if !isNull(t.Error) {
		if t.Error[0] == '"' {
			var s string
			if json.Unmarshal(t.Error, &s) != nil {
				return Run{}, false
			}
			r.Error = s
		} else {
			r.Error = string(bytes.TrimSpace(t.Error))
		}
	}
	return r, true
}
