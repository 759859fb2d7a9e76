package shape

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/jsonw"
	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/genai"
)

// traceInfo holds what is stamped on every span of one trace. Langfuse v4 filters per
// row and takes user, session, trace name and tags from each span's own attributes only
// (docs/langfuse.md), so a generation row without them falls out of every filter.
type traceInfo struct {
	id           pcommon.TraceID
	name         string // explicit langfuse.trace.name, else derived from the root span
	rootName     string
	session      string
	user         string
	tags         []string
	tagsJSON     string // tags as one JSON-array string, built once per trace
	env          string
	leadModel    string
	leadModelAt  pcommon.Timestamp
	hasLeadModel bool
}

// NewPlan works out, without changing td, the attributes each span of td needs for
// Langfuse. Everything is set-if-absent: an attribute the span already carries (from its
// emitter, or from an earlier plan applied to it) is never added again, and
// gen_ai.usage.* is never touched (docs/contract.md#usage).
//
// It adds only what Langfuse's server would not derive by itself from the span (its OTel
// ingestion's mappers): every byte added is gzipped and sent for every span.
//
// Trace-level values are taken from the spans of the same trace in this batch (and, with
// a Shaper, from earlier batches too).
//
// The plan comes from a pool: Release it when done.
func NewPlan(td ptrace.Traces) *Plan { return newPlan(td, nil) }

func newPlan(td ptrace.Traces, mem *TraceMemory) *Plan {
	n := td.SpanCount()
	p := planPool.Get().(*Plan)
	facts := slices.Grow(p.facts[:0], n)
	versions := slices.Grow(p.versions[:0], n)
	// the batch's traces, by index (pooled with the plan: no allocation per trace)
	if p.traceIdx == nil {
		p.traceIdx = map[pcommon.TraceID]int32{}
	}
	traces := p.traces[:0]
	var lastID pcommon.TraceID
	last := int32(-1)
	forEach(td, func(env string, sp ptrace.Span) {
		f := scan(sp.Attributes())
		// spans of one trace usually sit together: skip the map for a run of them
		if id := sp.TraceID(); last < 0 || id != lastID {
			i, ok := p.traceIdx[id]
			if !ok {
				i = int32(len(traces))
				traces = append(traces, traceInfo{id: id})
				p.traceIdx[id] = i
			}
			last, lastID = i, id
		}
		f.trace = last
		traces[last].observe(sp, &f, env)
		facts = append(facts, f)
		versions = append(versions, vendorhttp.NewVersion(vendorhttp.SpanKey{Trace: sp.TraceID(), Span: sp.SpanID()}, f.revision, f.mergeStatus))
	})
	mem.remember(traces)
	for i := range traces {
		traces[i].finish()
	}
	p.facts, p.versions, p.traces = facts, versions, traces
	p.items = slices.Grow(p.items[:0], n*5)
	p.ioff = append(slices.Grow(p.ioff[:0], n+1), 0)
	p.enc = slices.Grow(p.enc[:0], n*256)
	p.eoff = append(slices.Grow(p.eoff[:0], n+1), 0)
	i := 0
	forEach(td, func(_ string, sp ptrace.Span) {
		p.addSpan(sp.Attributes(), &facts[i])
		i++
	})
	return p
}

// Traces applies NewPlan(td) to td in place.
func Traces(td ptrace.Traces) {
	p := NewPlan(td)
	p.Apply(td)
	p.Release()
}

func forEach(td ptrace.Traces, f func(env string, sp ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		env := genai.FirstStringAttr(rs.Resource().Attributes(), attrDeployEnv, attrDeployEnvOld)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(env, spans.At(k))
			}
		}
	}
}

// spanFacts is what one pass over a span's attributes finds: everything shaping reads.
type spanFacts struct {
	trace                              int32 // index into the plan's traces
	op, caller, mergeStatus, agentName string
	metaCaller                         string // a caller moved by an earlier pass
	traceName                          string // langfuse.trace.name
	lfSession, semSession, convID      string // in Langfuse's precedence order
	lfUser, semUser, endUser           string
	respModel, reqModel                string
	hasTags, hasLegacyTags             bool
	hasType, hasLFModel, hasAIModelID  bool
	hasOIKind                          bool
	hasSubagent, hasUsage              bool
	hasUsageDetails, hasMetaSubagent   bool
	hasCost, hasCostDetails            bool
	hasSubagentCost                    bool
	hasMetaMerge                       bool
	hasToolAttrs                       bool
	revision                           int64 // agentmeter.merge.revision
}

// scan reads the attributes shaping needs in a single pass (Map.Get is a linear scan,
// and a span is looked up for some twenty keys).
func scan(attrs pcommon.Map) spanFacts {
	var f spanFacts
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case genai.AttrOperationName:
			f.op = v.AsString()
		case genai.AttrCaller:
			f.caller = v.AsString()
		case MetaCaller:
			f.metaCaller = v.AsString()
		case genai.AttrMergeStatus:
			f.mergeStatus = v.AsString()
		case genai.AttrAgentName:
			f.agentName = v.AsString()
		case AttrTraceName:
			f.traceName = v.AsString()
		case AttrSessionID:
			f.lfSession = v.AsString()
		case attrSemSessionID:
			f.semSession = v.AsString()
		case genai.AttrConversationID:
			f.convID = v.AsString()
		case AttrUserID:
			f.lfUser = v.AsString()
		case attrSemUserID:
			f.semUser = v.AsString()
		case genai.AttrEndUserID:
			f.endUser = v.AsString()
		case genai.AttrResponseModel:
			f.respModel = v.AsString()
		case genai.AttrRequestModel:
			f.reqModel = v.AsString()
		case AttrTraceTags:
			f.hasTags = true
		case attrLegacyTags:
			f.hasLegacyTags = true
		case AttrObservationType:
			f.hasType = true
		case AttrObservationModel:
			f.hasLFModel = true
		case attrAIModelID:
			f.hasAIModelID = true
		case attrOpenInferenceKind:
			f.hasOIKind = true
		case genai.AttrToolName, genai.AttrToolCallID:
			f.hasToolAttrs = true
		case genai.AttrSubagentInput, genai.AttrSubagentOutput:
			f.hasSubagent = true
		case genai.AttrUsageInput, genai.AttrUsageOutput:
			f.hasUsage = true
		case AttrObservationUsage:
			f.hasUsageDetails = true
		case genai.AttrCostTotal:
			f.hasCost = true
		case AttrObservationCost:
			f.hasCostDetails = true
		case genai.AttrSubagentCostTotal:
			f.hasSubagentCost = true
		case MetaSubagentInput:
			f.hasMetaSubagent = true
		case MetaMergeStatus:
			f.hasMetaMerge = true
		case genai.AttrMergeRevision:
			f.revision = genai.MergeRevisionValue(v)
		}
		return true
	})
	if f.caller == "" {
		f.caller = f.metaCaller
	}
	return f
}

// session and user as Langfuse reads them from this span alone.
func (f *spanFacts) session() string { return first(f.lfSession, f.semSession, f.convID) }
func (f *spanFacts) user() string    { return first(f.lfUser, f.semUser) }

func (t *traceInfo) observe(sp ptrace.Span, f *spanFacts, env string) {
	if t.name == "" {
		t.name = f.traceName
	}
	if t.rootName == "" && sp.ParentSpanID().IsEmpty() {
		t.rootName = rootTraceName(sp, f)
	}
	if t.session == "" {
		t.session = f.session()
	}
	if t.user == "" {
		t.user = first(f.lfUser, f.semUser, f.endUser)
	}
	if t.tags == nil && (f.hasTags || f.hasLegacyTags) {
		attrs := sp.Attributes()
		if tags := genai.StringsFromMap(attrs, AttrTraceTags); len(tags) > 0 {
			t.tags = tags
		} else if tags := genai.StringsFromMap(attrs, attrLegacyTags); len(tags) > 0 {
			t.tags = tags
		}
	}
	if t.env == "" {
		t.env = env
	}
	// DeerFlow tags a trace with the run's model: the lead agent's model, i.e. its first call.
	if genai.IsModelCall(f.op) && genai.CallerBucket(f.caller) == genai.BucketLeadAgent &&
		(!t.hasLeadModel || sp.StartTimestamp() < t.leadModelAt) {
		if m := first(f.reqModel, f.respModel); m != "" {
			t.leadModel, t.leadModelAt, t.hasLeadModel = m, sp.StartTimestamp(), true
		}
	}
}

func (t *traceInfo) finish() {
	if t.name == "" {
		t.name = t.rootName
	}
	if t.user == "" {
		t.user = defaultUserID
	}
	// Langfuse reads a JSON-array string as tags. One shared string per trace costs one
	// small allocation per trace, where a string-array attribute costs three per span.
	var b []byte
	if t.tags != nil {
		for _, tag := range t.tags {
			b = appendTag(b, "", tag)
		}
	} else {
		// DeerFlow's build_langfuse_trace_metadata: env:<environment>, then model:<model>.
		if t.env != "" {
			b = appendTag(b, tagEnvPrefix, t.env)
		}
		if t.leadModel != "" {
			b = appendTag(b, tagModelPref, t.leadModel)
		}
	}
	if len(b) > 0 {
		t.tagsJSON = string(append(b, ']'))
	}
}

// appendTag appends prefix+tag to the JSON array being written in b.
func appendTag(b []byte, prefix, tag string) []byte {
	if len(b) == 0 {
		b = append(make([]byte, 0, 64), '[')
	} else {
		b = append(b, ',')
	}
	return jsonw.AppendString(b, prefix+tag)
}

// rootTraceName names a trace after its root span, as DeerFlow names it after the
// assistant: the lead agent's trace is "lead-agent", a custom agent keeps its name.
func rootTraceName(sp ptrace.Span, f *spanFacts) string {
	if f.op == genai.OpInvokeAgent {
		switch f.agentName {
		case genai.LeadAgentName:
			return defaultLeadTraceName
		case "":
		default:
			return f.agentName
		}
	}
	return sp.Name()
}

// addSpan plans the attributes of one span.
func (p *Plan) addSpan(attrs pcommon.Map, f *spanFacts) {
	t := &p.traces[f.trace]
	if f.traceName == "" && t.name != "" {
		p.str(AttrTraceName, t.name)
	}
	// session and user only where this span would otherwise read differently:
	// gen_ai.conversation.id is already one of Langfuse's session attributes.
	if t.session != "" && f.session() != t.session && f.lfSession == "" {
		p.str(AttrSessionID, t.session)
	}
	if f.user() != t.user && f.lfUser == "" {
		p.str(AttrUserID, t.user)
	}
	if !f.hasTags && t.tagsJSON != "" {
		p.str(AttrTraceTags, t.tagsJSON)
	}

	if !f.hasType && inferredType(f) != ObservationType(f.op) {
		p.str(AttrObservationType, ObservationType(f.op))
	}

	if genai.IsModelCall(f.op) {
		// Langfuse prefers gen_ai.response.model, then ai.model.id, then the request
		// model; name it only when the request model would lose to something else.
		if !f.hasLFModel && f.respModel == "" && f.reqModel != "" && f.hasAIModelID {
			p.str(AttrObservationModel, f.reqModel)
		}
		if f.hasUsage && !f.hasUsageDetails {
			if u, ok := genai.UsageFromMap(attrs); ok {
				p.str(AttrObservationUsage, UsageDetails(u))
			}
		}
		// our cost wins over Langfuse's own price table, so its totals equal ours
		if f.hasCost && !f.hasCostDetails {
			if c, _, ok := genai.CostFromMap(attrs); ok {
				p.str(AttrObservationCost, CostDetails(c))
			}
		}
	}

	// The caller and merged subagent usage go to observation metadata as top-level
	// keys (Langfuse also files every raw attribute under metadata.attributes).
	if f.metaCaller == "" && f.caller != "" {
		p.str(MetaCaller, f.caller)
	}
	if f.mergeStatus != "" && !f.hasMetaMerge {
		p.str(MetaMergeStatus, f.mergeStatus)
	}
	if f.hasSubagent && !f.hasMetaSubagent {
		if su, ok := genai.SubagentUsageFromMap(attrs); ok {
			p.int(MetaSubagentInput, su.Input)
			p.int(MetaSubagentOutput, su.Output)
			p.int(MetaSubagentTotal, su.Total())
			p.int(MetaSubagentCacheRead, su.CacheRead)
			p.int(MetaSubagentCacheCreation, su.CacheCreation)
			p.int(MetaSubagentReasoning, su.Reasoning)
			if v, ok := attrs.Get(genai.AttrSubagentDispatches); ok {
				p.int(MetaSubagentDispatches, v.Int())
			}
			if ids := genai.StringsFromMap(attrs, genai.AttrSubagentToolCallIDs); len(ids) > 0 {
				p.strs(MetaSubagentToolCallIDs, ids)
			}
			// merged cost is metadata too, never cost_details: Langfuse's trace cost
			// is the sum of each call's own cost, counted once
			if f.hasSubagentCost {
				if sc, ok := genai.SubagentCostFromMap(attrs); ok {
					p.dbl(MetaSubagentCost, sc.Total)
				}
			}
		}
	}
	p.ioff = append(p.ioff, int32(len(p.items)))
	p.eoff = append(p.eoff, int32(len(p.enc)))
}

// inferredType is the observation type Langfuse's server gives a span without
// langfuse.observation.type (its OTel ingestion's mappers, the ones our spans can
// trigger), or "" when another framework's attribute (openinference.span.kind) would
// decide.
func inferredType(f *spanFacts) string {
	if f.hasOIKind {
		return ""
	}
	switch f.op {
	case genai.OpChat, "completion", "text_completion", "generate_content", "generate":
		return TypeGeneration
	case "embeddings":
		return "embedding"
	case genai.OpInvokeAgent, "create_agent":
		return TypeAgent
	case genai.OpExecuteTool:
		return TypeTool
	}
	switch {
	case f.hasToolAttrs:
		return TypeTool
	case f.hasLFModel || f.reqModel != "" || f.respModel != "":
		return TypeGeneration
	}
	return TypeSpan
}

// ObservationType maps gen_ai.operation.name to a Langfuse observation type: every
// model call (genai.IsModelCall) is a generation, so its usage and cost details show.
func ObservationType(op string) string {
	switch {
	case genai.IsModelCall(op):
		return TypeGeneration
	case op == genai.OpInvokeAgent:
		return TypeAgent
	case op == genai.OpExecuteTool:
		return TypeTool
	default:
		return TypeSpan
	}
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
