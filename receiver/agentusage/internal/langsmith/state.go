package langsmith

import (
	"encoding/json"
	"time"
)

// runState is a parked Run as stored on disk (the receiver's `storage`): every field,
// the undecoded raw ones included, so a restarted collector parks the run exactly as
// the killed one held it.
type runState struct {
	ID          string          `json:"id"`
	TraceID     string          `json:"trace_id,omitempty"`
	DottedOrder string          `json:"dotted_order,omitempty"`
	ParentRunID string          `json:"parent_run_id,omitempty"`
	Name        string          `json:"name,omitempty"`
	RunType     string          `json:"run_type,omitempty"`
	SessionName string          `json:"session_name,omitempty"`
	Start       time.Time       `json:"start"`
	End         time.Time       `json:"end"`
	Inputs      map[string]any  `json:"inputs,omitempty"`
	RawInputs   json.RawMessage `json:"raw_inputs,omitempty"`
	Outputs     map[string]any  `json:"outputs,omitempty"`
	RawOutputs  json.RawMessage `json:"raw_outputs,omitempty"`
	Extra       map[string]any  `json:"extra,omitempty"`
	RawExtra    json.RawMessage `json:"raw_extra,omitempty"`
	Error       string          `json:"error,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	Posted      bool            `json:"posted,omitempty"`
}

// EncodeRun serialises a parked run for storage.
func EncodeRun(r Run) ([]byte, error) {
	return json.Marshal(runState{
		ID: r.ID, TraceID: r.TraceID, DottedOrder: r.DottedOrder, ParentRunID: r.ParentRunID,
		Name: r.Name, RunType: r.RunType, SessionName: r.SessionName, Start: r.Start, End: r.End,
		Inputs: r.Inputs, RawInputs: r.RawInputs, Outputs: r.Outputs, RawOutputs: r.rawOutputs,
		Extra: r.Extra, RawExtra: r.rawExtra, Error: r.Error, Tags: r.Tags, Posted: r.Posted,
	})
}

// DecodeStoredRun reads a run EncodeRun wrote.
func DecodeStoredRun(b []byte) (Run, error) {
	var s runState
	if err := json.Unmarshal(b, &s); err != nil {
		return Run{}, err
	}
	return Run{
		ID: s.ID, TraceID: s.TraceID, DottedOrder: s.DottedOrder, ParentRunID: s.ParentRunID,
		Name: s.Name, RunType: s.RunType, SessionName: s.SessionName, Start: s.Start, End: s.End,
		Inputs: s.Inputs, RawInputs: s.RawInputs, Outputs: s.Outputs, rawOutputs: s.RawOutputs,
		Extra: s.Extra, rawExtra: s.RawExtra, Error: s.Error, Tags: s.Tags, Posted: s.Posted,
	}, nil
}
