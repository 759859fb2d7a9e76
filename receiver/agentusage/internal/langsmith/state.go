package langsmith

import (
	"encoding/json"
	"time"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
)

// runState is a parked Run as stored on disk (the receiver's `storage`): every field,
// the undecoded objects as they came, so a restarted collector parks the run exactly
// as the killed one held it.
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
	RawInputs   json.RawMessage `json:"raw_inputs,omitempty"`
	RawOutputs  json.RawMessage `json:"raw_outputs,omitempty"`
	RawExtra    json.RawMessage `json:"raw_extra,omitempty"`
	Error       string          `json:"error,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	Posted      bool            `json:"posted,omitempty"`
}

// EncodeRun serialises a parked run for storage.
func EncodeRun(r Run) ([]byte, error) {
	s := runState{
		ID: r.ID, TraceID: r.TraceID, DottedOrder: r.DottedOrder, ParentRunID: r.ParentRunID,
		Name: r.Name, RunType: r.RunType, SessionName: r.SessionName, Start: r.Start, End: r.End,
		RawOutputs: r.outputs, RawExtra: r.extra, Error: r.Error, Tags: r.Tags, Posted: r.Posted,
	}
	// a multipart inputs part is kept unchecked; one that is not an object reads as
	// none, so it is stored as none (json.RawMessage must be valid JSON)
	if validObject(r.inputs) {
		s.RawInputs = r.inputs
	}
	return json.Marshal(s)
}

// DecodeStoredRun reads a run EncodeRun wrote.
func DecodeStoredRun(b []byte) (Run, error) {
	var s runState
	if err := json.Unmarshal(b, &s); err != nil {
		return Run{}, err
	}
	r := Run{
		ID: s.ID, TraceID: s.TraceID, DottedOrder: s.DottedOrder, ParentRunID: s.ParentRunID,
		Name: s.Name, RunType: s.RunType, SessionName: s.SessionName, Start: s.Start, End: s.End,
		inputs: storedObject(s.RawInputs), outputs: storedObject(s.RawOutputs),
		extra: storedObject(s.RawExtra), Error: s.Error, Tags: s.Tags, Posted: s.Posted,
	}
	return r, nil
}

// storedObject is a stored object's bytes; nil when none was stored.
func storedObject(raw json.RawMessage) []byte {
	if b := rawjson.TrimSpace(raw); rawjson.IsObject(b) {
		return b
	}
	return nil
}
