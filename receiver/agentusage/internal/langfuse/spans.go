package langfuse

import (
	"encoding/json"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// ServiceName is service.name of spans built from legacy ingestion events.
const ServiceName = "langfuse"

// BuildObservations turns observations (e.g. expired ones) into spans as they are.
func (in *Ingester) BuildObservations(obs []Observation) ptrace.Traces { return in.build(obs) }

// rootSpanID is the span of a trace-create: the parent of observations without one.
func rootSpanID(traceID string) string { return "trace\x00" + traceID }

func (in *Ingester) build(obs []Observation) ptrace.Traces {
	// trace-creates first so their attributes reach observations of the same batch
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].IsTrace && !obs[j].IsTrace })
	for _, o := range obs {
		if o.IsTrace {
			in.rememberTrace(o)
		}
	}
	b := build.New()
	// a trace's id and root span id are hashes: once per trace, not per observation
	traceIDs := map[string]traceSpanIDs{}
	for _, o := range obs {
		tids, ok := traceIDs[o.TraceID]
		if !ok {
			tids = traceSpanIDs{ids.TraceID(o.TraceID), ids.SpanID("langfuse/obs", rootSpanID(o.TraceID))}
			traceIDs[o.TraceID] = tids
		}
		ti, _ := in.traces.Get(o.TraceID)
		rec := decideObservation(o, ti, tids)
		b.Add(&rec)
	}
	return b.Traces()
}

// traceSpanIDs are a Langfuse trace's OTel trace id and the span id of its root.
type traceSpanIDs struct {
	trace pcommon.TraceID
	root  pcommon.SpanID
}

// decideObservation decides what one observation (or trace root) is: a generation is
// a model call, a tool (or a span naming the tool call it ran) a tool call, an agent
// and a trace's root an agent run, anything else a step. What the observation does not
// say itself (session, user, run, caller) comes from its trace-create.
func decideObservation(o Observation, ti traceInfo, tids traceSpanIDs) record.Record {
	rec := record.Record{Kind: record.Step, Service: ServiceName, TraceID: tids.trace,
		Start: o.Start, End: o.End, Name: o.Name, SpanKind: ptrace.SpanKindInternal}
	rec.ThreadID, rec.UserID = o.SessionID, o.UserID
	if rec.ThreadID == "" {
		rec.ThreadID = ti.SessionID
	}
	if rec.UserID == "" {
		rec.UserID = ti.UserID
	}
	rec.RunID, _ = o.Metadata["run_id"].(string)
	if rec.RunID == "" {
		rec.RunID = ti.RunID
	}
	if rec.RunID == "" {
		rec.RunID = o.TraceID
	}
	rec.Caller, _ = o.Metadata["caller"].(string)
	if rec.Caller == "" {
		rec.Caller = genai.CallerFromTags(o.Tags)
	}
	if rec.Caller == "" {
		// else none, as on the OTLP face: what the request does not say, subagentmerge
		// attributes from the whole trace's shape (a call inside a tool-dispatched
		// agent run is that subagent's), and an uncalled span counts as the lead's
		rec.Caller = ti.Caller
	}
	if o.Level == "ERROR" {
		rec.Failed, rec.Error = true, o.StatusMsg
	}
	if o.IsTrace {
		rec.Kind = record.AgentRun
		rec.SpanID = tids.root // a trace's id is its root's
		if rec.Name == "" {
			rec.Name = genai.LeadAgentName
		}
		rec.AgentID = o.ID
		return rec
	}
	rec.SpanID = ids.SpanID("langfuse/obs", o.ID)
	if o.ParentID != "" {
		rec.ParentSpanID = ids.SpanID("langfuse/obs", o.ParentID)
	} else {
		rec.ParentSpanID = tids.root
	}
	toolCallID, _ := o.Metadata["tool_call_id"].(string)
	switch {
	case o.Kind == "generation":
		rec.Kind = record.ModelCall
		rec.SpanKind = ptrace.SpanKindClient
		rec.RequestModel, rec.ResponseModel = o.Model, o.Model
		rec.Provider, _ = o.Metadata["provider"].(string)
		rec.Usage, rec.HasUsage = o.Usage, o.HasUsage
		if arr, ok := o.Metadata["response_tool_call_ids"].([]any); ok {
			for _, e := range arr {
				if s, ok := e.(string); ok && s != "" {
					rec.ResponseToolCallIDs = append(rec.ResponseToolCallIDs, s)
				}
			}
		}
		if len(rec.ResponseToolCallIDs) == 0 {
			rec.ResponseToolCallIDs = genai.ResponseToolCallIDs(outputValue(o.Output))
		}
	case o.Kind == "tool" || (o.Kind == "span" && toolCallID != ""):
		rec.Kind = record.ToolCall
		if toolCallID == "" {
			// LangChain's handler records no id in metadata: the ToolMessage it
			// returned names the call it answered
			toolCallID = genai.ToolCallIDOf(outputValue(o.Output), nil)
		}
		rec.ToolCallID = toolCallID
		rec.SubagentStatus, _ = o.Metadata["subagent_status"].(string)
	case o.Kind == "agent":
		rec.Kind = record.AgentRun
		rec.AgentID = o.ID
		rec.ToolCallID = toolCallID
	}
	return rec
}

// outputValue decodes an observation's raw output (from the request, or read back from
// storage); anything that is not JSON is no output.
func outputValue(raw json.RawMessage) any {
	if d, ok := rawjson.Parse(raw); ok {
		return rawjson.Value(d.Root())
	}
	return nil
}
