package langsmith

import (
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
)

// build turns runs, in dotted order, into one span each: its record, its place in the
// tree and its caller. also are runs of the same request that stay parked; they make no
// span but still tell their children who they are.
func (t *Translator) build(runs, also []Run) ptrace.Traces {
	b := build.New()
	lp := localMaps.Get().(*map[string]runInfo)
	local := *lp
	defer func() {
		if len(local) <= maxPooledLocal {
			clear(local)
			localMaps.Put(lp)
		}
	}()
	var spids spanIDs // span ids of unprepared runs, made on first use
	lookup := func(id string) (runInfo, bool) {
		if ri, ok := local[id]; ok {
			return ri, true
		}
		return t.recent.Get(id)
	}
	// parked runs of this request still tell their children who they are
	var arena []idxField // metadata index of unprepared runs, grown on first use
	for i := range also {
		r := &also[i]
		local[r.ID] = t.info(r, metadata(r), lookup)
	}
	var own prepared // what Prepare would have read from an unprepared run
	for i := range runs {
		r := &runs[i]
		if r.prep == nil {
			// prepared here for this iteration only, so that info and place read it
			// as they read Prepare's (tool call id, run type, parent) instead of
			// working it out again
			if arena == nil {
				arena = make([]idxField, 0, 8*len(runs))
				spids = make(spanIDs, len(runs)+1)
			}
			own = prepared{md: indexedMetadata(r, &arena), runType: strings.ToLower(r.RunType), parentID: parentIDOf(r)}
			ownRecord(&own.rec, r, own.md, own.runType, own.parentID, spids)
			r.prep = &own
		}
		// placed in place: the prepared record belongs to this request alone
		rec := &r.prep.rec
		ri := t.info(r, r.prep.md, lookup)
		local[r.ID] = ri
		t.emitted.Put(r.ID, true)
		t.place(rec, r, ri, lookup)
		b.Add(rec)
		if r.prep == &own {
			r.prep = nil
		}
	}
	for id, ri := range local {
		t.recent.Put(id, ri)
	}
	return b.Traces()
}

// localMaps recycles build's map of the runs of one request.
var localMaps = sync.Pool{New: func() any { m := make(map[string]runInfo, 128); return &m }}

// maxPooledLocal: bigger maps are left to the garbage collector.
const maxPooledLocal = 4096

// spanIDs memoises span ids within one build: siblings share their parent's id, and
// each id costs a SHA-256.
type spanIDs map[string]pcommon.SpanID

func (c spanIDs) of(runID string) pcommon.SpanID {
	id, ok := c[runID]
	if !ok {
		id = ids.SpanID("langsmith/run", runID)
		c[runID] = id
	}
	return id
}

func (t *Translator) parentID(r *Run) string {
	if r.prep != nil {
		return r.prep.parentID
	}
	return parentIDOf(r)
}

func parentIDOf(r *Run) string {
	if r.ParentRunID != "" {
		return r.ParentRunID
	}
	ids := dottedIDs(r.DottedOrder)
	if len(ids) >= 2 {
		return ids[len(ids)-2]
	}
	return ""
}

// info works out trace, caller, thread and agent identity of a run, inheriting from
// its parent when the run does not say.
func (t *Translator) info(r *Run, md view, lookup func(string) (runInfo, bool)) runInfo {
	parentID := t.parentID(r)
	parent, hasParent := runInfo{}, false
	if parentID != "" {
		parent, hasParent = lookup(parentID)
	}
	var ri runInfo
	if r.prep != nil {
		ri.RunType, ri.ToolCallID = r.prep.runType, r.prep.rec.ToolCallID
	} else {
		ri.RunType = strings.ToLower(r.RunType)
		if ri.RunType == "tool" {
			ri.ToolCallID = toolCallID(r)
		}
	}
	switch {
	case r.TraceID != "":
		ri.TraceID = r.TraceID
	case len(dottedIDs(r.DottedOrder)) > 0:
		ri.TraceID = dottedIDs(r.DottedOrder)[0]
	case hasParent:
		ri.TraceID = parent.TraceID
	case parentID == "":
		ri.TraceID = r.ID // a root run's id is its trace id
	default:
		ri.TraceID = parentID // best effort: the parent is unknown here
	}
	ri.ThreadID = md.firstString("thread_id", "session_id", "conversation_id")
	if ri.ThreadID == "" && hasParent {
		ri.ThreadID = parent.ThreadID
	}
	ri.RunID = md.firstString("run_id")
	if ri.RunID == "" {
		if hasParent {
			ri.RunID = parent.RunID
		} else {
			ri.RunID = ri.TraceID
		}
	}
	caller := genai.CallerFromTags(r.Tags)
	if caller == "" {
		caller = md.firstString("caller", genai.AttrCaller)
	}
	if hasParent {
		ri.AgentTag = parent.AgentTag
	}
	if ri.RunType == "chain" || ri.RunType == "" {
		tag := md.firstString("lc_agent_name", "agent_name")
		underTool := hasParent && parent.RunType == "tool"
		// LangGraph copies the agent's lc_agent_name into the metadata of every run
		// inside it (each graph node: model_request, tools, RunnableLambda, ...): only
		// the run where the tag changes is the agent's own run. A root run, and a chain
		// directly under a tool run (a subagent the tool invoked), are agents too.
		isAgent := parentID == "" || underTool || (tag != "" && tag != ri.AgentTag)
		if isAgent {
			name := tag
			if name == "" || (underTool && tag == ri.AgentTag) {
				// a subagent invoked with its caller's config inherits the caller's
				// lc_agent_name: its own run's name says who it is
				name = r.Name
			}
			if name == "" {
				name = genai.LeadAgentName
			}
			ri.Agent = name
			if tag == "" {
				tag = name
			}
			ri.AgentTag = tag
			if caller == "" && hasParent && parent.RunType == "tool" {
				caller = genai.SubagentCaller(name)
			}
		}
	}
	if caller == "" && hasParent {
		caller = parent.Caller
	}
	// No default: a run no tag, metadata or parent names a caller for stays uncalled,
	// and the merge attributes it from the trace's shape (it sees the whole trace; the
	// SDKs send a long run's runs in several batches, so a subagent's runs may come
	// before the task tool run they sit under). An uncalled call counts as the lead's
	// (genai.CallerBucket).
	ri.Caller = caller
	return ri
}

func metadata(r *Run) view {
	md, _ := r.extraView().child("metadata")
	return md
}

// indexedMetadata is metadata, indexed in arena: it is read key by key many times per
// run.
func indexedMetadata(r *Run, arena *[]idxField) view {
	md, ok := r.extraView().child("metadata")
	if ok && md.raw != nil {
		md = indexed(md.raw, md.noEscU, arena)
	}
	return md
}

// ownRecord fills the zero record rec with what it takes from the run alone (Prepare
// computes it outside the translator's lock): its kind and the facts of a model call or a tool
// call, its ids, times, user and error. Its place in the tree of runs (trace, thread,
// run, caller, agent) is filled by place.
func ownRecord(rec *record.Record, r *Run, md view, runType, parentID string, spids spanIDs) {
	// field by field into a zero record: a Record is big, and this runs for every run
	rec.Service, rec.LangSmithProject = r.SessionName, r.SessionName
	if rec.Service == "" {
		rec.Service = DefaultService
	}
	rec.SpanID = spids.of(r.ID)
	if parentID != "" {
		rec.ParentSpanID = spids.of(parentID)
	}
	rec.Start, rec.End = r.Start, r.End
	rec.UserID = md.firstString("user_id", "langfuse_user_id")
	rec.Failed, rec.Error = r.Error != "", r.Error
	rec.LangSmithPlacement = placement(r, parentID)
	switch runType {
	case "llm", "chat_model":
		rec.Kind = record.ModelCall
		modelCall(rec, r, md)
	case "tool":
		rec.Kind = record.ToolCall
		rec.Name = r.Name
		rec.ToolCallID = toolCallID(r)
		rec.SubagentStatus = md.firstString("subagent_status")
		if rec.SubagentStatus == "" {
			rec.SubagentStatus = r.outputView().findString("subagent_status")
		}
	default:
		// a chain is an agent run or a step depending on the runs around it (place)
		rec.Name = r.Name
		if rec.Name == "" {
			rec.Name = runType
		}
	}
}

// placement is the run's dotted_order when it addresses this run, under the parent the
// run names, in the trace it names; else "" (a run sent without one, or with one that
// disagrees with its ids). With it the collector sends the run to LangSmith as soon as it
// comes, under the SDK's ids, instead of once its whole trace is there.
func placement(r *Run, parentID string) string {
	root, parent, last, ok := dottedorder.Ends(r.DottedOrder)
	if !ok || !strings.EqualFold(last.RunID, r.ID) || !strings.EqualFold(parent.RunID, parentID) ||
		(r.TraceID != "" && !strings.EqualFold(root.RunID, r.TraceID)) {
		return ""
	}
	return dottedorder.Lower(r.DottedOrder) // the ids as LangSmith writes them
}

// place fills in what a record takes from the runs around it: the trace, thread, run
// and caller, and for a chain whether it is an agent's own run.
func (t *Translator) place(rec *record.Record, r *Run, ri runInfo, lookup func(string) (runInfo, bool)) {
	rec.TraceID = ids.TraceID(ri.TraceID)
	rec.ThreadID, rec.RunID, rec.Caller = ri.ThreadID, ri.RunID, ri.Caller
	if rec.Kind != record.Step || ri.Agent == "" {
		return
	}
	rec.Kind = record.AgentRun
	rec.Name, rec.AgentID = ri.Agent, r.ID
	// a subagent's run span names the task call that dispatched it
	if pid := t.parentID(r); pid != "" {
		if p, ok := lookup(pid); ok && p.RunType == "tool" && p.ToolCallID != "" {
			rec.ToolCallID = p.ToolCallID
		}
	}
}

// modelCall reads an llm run's model, provider, usage and the tool calls its response
// asked for.
func modelCall(rec *record.Record, r *Run, md view) {
	model := md.firstString("ls_model_name")
	if model == "" {
		inv, _ := r.extraView().child("invocation_params")
		model = inv.firstString("model", "model_name")
	}
	out := r.outputView().probe()
	respModel := out.findString("model_name")
	if respModel == "" {
		respModel = model
	}
	if model == "" {
		model = respModel
	}
	rec.RequestModel, rec.ResponseModel = model, respModel
	rec.Provider = md.firstString("ls_provider")
	rec.Usage, rec.CacheCreation1h, rec.HasUsage = usageOf(r, out)
	rec.ResponseToolCallIDs = out.toolCallIDs()
}

// toolCallID finds the provider tool call id of a tool run: LangChain puts it in
// extra (tool_call_id), hand-written runs in metadata or inputs, and the ToolMessage
// output carries it too.
func toolCallID(r *Run) string {
	if id := r.extraView().findString("tool_call_id"); id != "" {
		return id
	}
	in := r.inputView()
	if id := in.findString("tool_call_id"); id != "" {
		return id
	}
	if tc, ok := in.child("tool_call"); ok {
		if id := tc.firstString("id"); id != "" {
			return id
		}
	}
	return r.outputView().findString("tool_call_id")
}
