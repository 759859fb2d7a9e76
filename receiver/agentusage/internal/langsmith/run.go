// Package langsmith decodes what the LangSmith SDKs send (POST /runs, PATCH
// /runs/{id}, POST /runs/batch, POST /runs/multipart) and turns runs into the
// contract's spans: llm runs → chat, tool runs → execute_tool, agent chains →
// invoke_agent, other runs → plain internal spans keeping the tree.
package langsmith

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// Run is one LangSmith run as far as a POST and/or PATCH told us.
type Run struct {
	ID          string
	TraceID     string
	DottedOrder string
	ParentRunID string
	Name        string
	RunType     string
	SessionName string
	Start       time.Time
	End         time.Time
	Inputs      map[string]any
	// RawInputs holds inputs not decoded yet: they are only read for tool runs (the
	// tool call id), and are often the biggest part of a run (whole prompts).
	RawInputs json.RawMessage
	Outputs   map[string]any
	Extra     map[string]any
	Error     string
	Tags      []string
	// rawOutputs and rawExtra hold outputs and extra not decoded (the scanning
	// decoders' runs): a validated JSON object, read through view. At most one of
	// Outputs/rawOutputs (Extra/rawExtra) is set.
	rawOutputs []byte
	rawExtra   []byte
	// Posted is true once the run's POST was seen (a PATCH alone leaves it false).
	Posted bool
	// prep is what Prepare read from this run before the translator's lock; nil
	// when the run was not prepared or was merged since.
	prep *prepared
}

// Ended reports whether the run has finished (end_time known).
func (r Run) Ended() bool { return !r.End.IsZero() }

// Op is one create ("post") or update ("patch") of a run.
type Op struct {
	Patch bool
	Run   Run
	// Field locates the item in the request for error messages ("post[3]").
	Field string
}

// ItemError is one rejected item of a batch.
type ItemError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// decodeObject decodes JSON with numbers kept as json.Number.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if m == nil {
		return nil, errors.New("must be a JSON object")
	}
	return m, nil
}

// parseRun validates one run object. Unknown fields are ignored; a known field with
// the wrong type is an error naming it. id is required; patches may omit everything
// else.
func parseRun(m map[string]any, patch bool) (Run, error) {
	var r Run
	var errs []error
	str := func(key string) string {
		v, ok := m[key]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			errs = append(errs, fielderr.New(key, "must be a string"))
		}
		return s
	}
	obj := func(key string) map[string]any {
		v, ok := m[key]
		if !ok || v == nil {
			return nil
		}
		o, ok := v.(map[string]any)
		if !ok {
			errs = append(errs, fielderr.New(key, "must be a JSON object"))
		}
		return o
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
	r.ID = str("id")
	if r.ID == "" {
		errs = append(errs, fielderr.New("id", "is required"))
	} else if !ids.IsUUIDOrHex(r.ID) {
		errs = append(errs, fielderr.New("id", "must be a UUID, got %q", build.Truncate(r.ID, 64)))
	}
	r.TraceID = str("trace_id")
	if r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID) {
		errs = append(errs, fielderr.New("trace_id", "must be a UUID"))
	}
	r.DottedOrder = str("dotted_order")
	r.ParentRunID = str("parent_run_id")
	r.Name = str("name")
	r.RunType = str("run_type")
	r.SessionName = str("session_name")
	r.Start = tm("start_time")
	r.End = tm("end_time")
	if raw, ok := m["inputs"].(json.RawMessage); ok {
		r.RawInputs = raw
	} else {
		r.Inputs = obj("inputs")
	}
	r.Outputs = obj("outputs")
	r.Extra = obj("extra")
	if v, ok := m["error"]; ok && v != nil {
		switch e := v.(type) {
		case string:
			r.Error = e
		default:
			b, _ := json.Marshal(e)
			r.Error = string(b)
		}
	}
	if v, ok := m["tags"]; ok && v != nil {
		arr, ok := v.([]any)
		if !ok {
			errs = append(errs, fielderr.New("tags", "must be an array of strings"))
		}
		for _, t := range arr {
			if s, ok := t.(string); ok {
				r.Tags = append(r.Tags, s)
			}
		}
	}
	r.Posted = !patch
	return r, errors.Join(errs...)
}

// Merge applies an update (or a second copy of the create) onto base: every field the
// update sets wins; extra.metadata is merged key by key, since the SDKs send metadata
// on the POST and often only runtime info on the PATCH.
func Merge(base, upd Run) Run {
	out := base
	setS := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setS(&out.TraceID, upd.TraceID)
	setS(&out.DottedOrder, upd.DottedOrder)
	setS(&out.ParentRunID, upd.ParentRunID)
	setS(&out.Name, upd.Name)
	setS(&out.RunType, upd.RunType)
	setS(&out.SessionName, upd.SessionName)
	setS(&out.Error, upd.Error)
	if !upd.Start.IsZero() {
		out.Start = upd.Start
	}
	if !upd.End.IsZero() {
		out.End = upd.End
	}
	if upd.Inputs != nil {
		out.Inputs, out.RawInputs = upd.Inputs, nil
	} else if upd.RawInputs != nil {
		out.Inputs, out.RawInputs = nil, upd.RawInputs
	}
	if upd.Outputs != nil {
		out.Outputs, out.rawOutputs = upd.Outputs, nil
	} else if upd.rawOutputs != nil {
		out.Outputs, out.rawOutputs = nil, upd.rawOutputs
	}
	if len(upd.Tags) > 0 {
		out.Tags = upd.Tags
	}
	if upd.Extra != nil || upd.rawExtra != nil {
		if out.Extra == nil && out.rawExtra == nil {
			out.Extra, out.rawExtra = upd.Extra, upd.rawExtra
		} else {
			// rare enough (a POST and its PATCH both carrying extra) to decode
			baseExtra, updExtra := base.extra().decode(), upd.extra().decode()
			merged := make(map[string]any, len(baseExtra)+len(updExtra))
			for k, v := range baseExtra {
				merged[k] = v
			}
			for k, v := range updExtra {
				if k == "metadata" {
					bm, _ := merged["metadata"].(map[string]any)
					um, _ := v.(map[string]any)
					if bm != nil && um != nil {
						mm := make(map[string]any, len(bm)+len(um))
						for k2, v2 := range bm {
							mm[k2] = v2
						}
						for k2, v2 := range um {
							mm[k2] = v2
						}
						merged[k] = mm
						continue
					}
				}
				merged[k] = v
			}
			out.Extra, out.rawExtra = merged, nil
		}
	}
	out.Posted = base.Posted || upd.Posted
	if out.ID == "" {
		out.ID = upd.ID
	}
	return out
}

// outputs and extra read the run's outputs and extra, decoded or raw.
func (r Run) outputs() view {
	if r.rawOutputs != nil {
		return rawView(r.rawOutputs)
	}
	return mapView(r.Outputs)
}

func (r Run) extra() view {
	if r.rawExtra != nil {
		return rawView(r.rawExtra)
	}
	return mapView(r.Extra)
}

// detach copies the parts of a run that point into a request body, so a parked run
// does not keep the whole body alive.
func (r Run) detach() Run {
	r.prep = nil // may point into the request's buffer
	if r.RawInputs != nil {
		r.RawInputs = bytes.Clone(r.RawInputs)
	}
	if r.rawOutputs != nil {
		r.rawOutputs = bytes.Clone(r.rawOutputs)
	}
	if r.rawExtra != nil {
		r.rawExtra = bytes.Clone(r.rawExtra)
	}
	return r
}

// inputs returns the run's inputs, decoding them on first use; inputs that are not a
// JSON object read as none (they are content we do not otherwise use).
func (r Run) inputs() map[string]any {
	if r.Inputs != nil || len(r.RawInputs) == 0 {
		return r.Inputs
	}
	var m map[string]any
	if json.Unmarshal(r.RawInputs, &m) != nil {
		return nil
	}
	return m
}
