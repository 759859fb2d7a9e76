package langfuse

import (
	"encoding/json"
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// Observation is one Langfuse entity (a trace or an observation) as far as its create
// and update events told us.
type Observation struct {
	ID       string
	TraceID  string
	IsTrace  bool   // from trace-create: the trace's root
	Kind     string // generation, span, event, agent, tool, chain, … (lower case)
	Name     string
	ParentID string
	Start    time.Time
	End      time.Time
	Model    string
	Usage    genai.Usage
	HasUsage bool
	// Metadata holds the metadata keys the face reads (metadataKeys), decoded.
	Metadata map[string]any
	// Output is the observation's output as raw JSON: only a generation's or a tool's
	// is ever read (for the tool call ids in it).
	Output    json.RawMessage
	Level     string
	StatusMsg string
	SessionID string
	UserID    string
	Tags      []string
	Created   bool // a *-create was seen
}

// finished reports whether the observation itself is whole: a trace at once; an
// observation once its create was seen (an update alone lacks name, model and usage —
// the SDK sends events out of order, so an update can come first) and, except for
// events, once it has an end time.
func (o Observation) finished() bool {
	return o.IsTrace || (o.Created && (o.Kind == "event" || !o.End.IsZero()))
}

// mergeObs applies an update (or a second create) onto base: every field the update
// sets wins; metadata is merged key by key.
func mergeObs(base, upd Observation) Observation {
	out := base
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&out.TraceID, upd.TraceID)
	set(&out.Name, upd.Name)
	set(&out.ParentID, upd.ParentID)
	set(&out.Model, upd.Model)
	set(&out.Level, upd.Level)
	set(&out.StatusMsg, upd.StatusMsg)
	set(&out.SessionID, upd.SessionID)
	set(&out.UserID, upd.UserID)
	if upd.Created || out.Kind == "" {
		out.Kind = upd.Kind
	}
	out.IsTrace = out.IsTrace || upd.IsTrace
	out.Created = out.Created || upd.Created
	if !upd.Start.IsZero() {
		out.Start = upd.Start
	}
	if !upd.End.IsZero() {
		out.End = upd.End
	}
	if upd.HasUsage {
		out.Usage, out.HasUsage = upd.Usage, true
	}
	if len(upd.Output) > 0 {
		out.Output = upd.Output
	}
	if len(upd.Tags) > 0 {
		out.Tags = upd.Tags
	}
	if upd.Metadata != nil {
		if out.Metadata == nil {
			out.Metadata = upd.Metadata
		} else {
			mm := make(map[string]any, len(out.Metadata)+len(upd.Metadata))
			for k, v := range out.Metadata {
				mm[k] = v
			}
			for k, v := range upd.Metadata {
				mm[k] = v
			}
			out.Metadata = mm
		}
	}
	if out.ID == "" {
		out.ID = upd.ID
	}
	return out
}
