// Package langsmith decodes what the LangSmith SDKs send (POST /runs, PATCH
// /runs/{id}, POST /runs/batch, POST /runs/multipart) and turns runs into the
// contract's records: llm runs → model calls, tool runs → tool calls, agent chains →
// agent runs, other runs → steps keeping the tree (internal/build makes the spans).
package langsmith

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
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
	Error       string
	Tags        []string
	// inputs, outputs and extra are the run's free-form objects, undecoded: slices of
	// the request body (copies once the run is parked), read through view; nil when
	// absent. outputs and extra are checked JSON objects. inputs are often the biggest
	// part of a run (whole prompts) and read only for tool runs (the tool call id):
	// a multipart inputs part is kept unchecked and checked when read (inputView).
	inputs, outputs, extra []byte
	// Posted is true once the run's POST was seen (a PATCH alone leaves it false).
	Posted bool
	// prep is what Prepare read from this run before the translator's lock; nil
	// when the run was not prepared or was merged since.
	prep *prepared
}

// Ended reports whether the run has finished (end_time known).
func (r *Run) Ended() bool { return !r.End.IsZero() }

// Op is one create ("post") or update ("patch") of a run.
type Op struct {
	Patch bool
	Run   Run
}

// ItemError is one rejected item of a batch: Field locates the item ("post[3]",
// "post.<id>" in a multipart body), Message names the offending fields
// ("post[3].end_time: ...").
type ItemError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
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
	if upd.inputs != nil {
		out.inputs = upd.inputs
	}
	if upd.outputs != nil {
		out.outputs = upd.outputs
	}
	if len(upd.Tags) > 0 {
		out.Tags = upd.Tags
	}
	if upd.extra != nil {
		if out.extra == nil {
			out.extra = upd.extra
		} else {
			out.extra = mergeExtra(base.extra, upd.extra)
		}
	}
	out.Posted = base.Posted || upd.Posted
	if out.ID == "" {
		out.ID = upd.ID
	}
	return out
}

// mergeExtra merges two extra objects, metadata key by key. Rare enough (a POST and
// its PATCH both carrying extra) to decode both; numbers stay exact (json.Number).
func mergeExtra(base, upd []byte) []byte {
	b, u := decodeMap(base), decodeMap(upd)
	merged := make(map[string]any, len(b)+len(u))
	for k, v := range b {
		merged[k] = v
	}
	for k, v := range u {
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
	out, err := json.Marshal(merged)
	if err != nil { // cannot happen for decoded JSON; keep the update's
		return upd
	}
	return out
}

// decodeMap decodes a checked JSON object, numbers as json.Number.
func decodeMap(raw []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	_ = dec.Decode(&m)
	return m
}

// outputs and extra read the run's outputs and extra.
func (r *Run) outputView() view { return rawView(r.outputs) }

func (r *Run) extraView() view { return rawView(r.extra) }

// inputView reads the run's inputs; inputs that are not a JSON object read as none
// (they are content we do not otherwise use).
func (r *Run) inputView() view {
	if !validObject(r.inputs) {
		return view{}
	}
	return rawView(rawjson.TrimSpace(r.inputs)) // a multipart part may have space around it
}

// detach copies the parts of a run that point into a request body, so a parked run
// does not keep the whole body alive.
func (r Run) detach() Run {
	r.prep = nil // may point into the request's buffer
	r.inputs = bytes.Clone(r.inputs)
	r.outputs = bytes.Clone(r.outputs)
	r.extra = bytes.Clone(r.extra)
	return r
}
