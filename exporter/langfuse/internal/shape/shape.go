package shape

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// traceInfo holds what is stamped on every span of one trace. Langfuse v4 filters per
// row and takes user, session, trace name and tags from each span's own attributes only
// (vendor notes §1.7), so a generation row without them falls out of every filter.
type traceInfo struct {
	name         string // explicit langfuse.trace.name, else derived from the root span
	rootName     string
	session      string
	user         string
	tags         []string
	env          string
	leadModel    string
	leadModelAt  pcommon.Timestamp
	hasLeadModel bool
}

// Traces rewrites td in place for Langfuse. It only adds attributes (set-if-absent for
// anything an emitter may have set itself) and never touches gen_ai.usage.*, so applying
// it twice — a retried or re-queued batch — gives the same spans.
//
// Trace-level values are taken from the spans of the same trace in this batch; a trace
// whose root span arrives in a later batch gets its name from that batch (subagentmerge
// and batch upstream release whole traces, so this is the exception).
func Traces(td ptrace.Traces) {
	infos := collect(td)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				Span(sp.Attributes(), infos[sp.TraceID()])
			}
		}
	}
}

// collect gathers the per-trace values in one pass over the batch.
func collect(td ptrace.Traces) map[pcommon.TraceID]*traceInfo {
	infos := make(map[pcommon.TraceID]*traceInfo)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		env := firstStr(rs.Resource().Attributes(), attrDeployEnv, attrDeployEnvOld)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				info := infos[sp.TraceID()]
				if info == nil {
					info = &traceInfo{}
					infos[sp.TraceID()] = info
				}
				info.observe(sp, env)
			}
		}
	}
	for _, info := range infos {
		info.finish()
	}
	return infos
}

func (t *traceInfo) observe(sp ptrace.Span, env string) {
	attrs := sp.Attributes()
	if t.name == "" {
		t.name = str(attrs, AttrTraceName)
	}
	if t.rootName == "" && sp.ParentSpanID().IsEmpty() {
		t.rootName = rootTraceName(sp)
	}
	if t.session == "" {
		t.session = firstStr(attrs, AttrSessionID, attrSemSessionID, genai.AttrConversationID)
	}
	if t.user == "" {
		t.user = firstStr(attrs, AttrUserID, attrSemUserID, genai.AttrEndUserID)
	}
	if t.tags == nil {
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
	if str(attrs, genai.AttrOperationName) == genai.OpChat &&
		genai.CallerBucket(str(attrs, genai.AttrCaller)) == genai.BucketLeadAgent &&
		(!t.hasLeadModel || sp.StartTimestamp() < t.leadModelAt) {
		if m := firstStr(attrs, genai.AttrRequestModel, genai.AttrResponseModel); m != "" {
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
	if t.tags == nil {
		// DeerFlow's build_langfuse_trace_metadata: env:<environment>, then model:<model>.
		if t.env != "" {
			t.tags = append(t.tags, tagEnvPrefix+t.env)
		}
		if t.leadModel != "" {
			t.tags = append(t.tags, tagModelPref+t.leadModel)
		}
	}
}

// rootTraceName names a trace after its root span, as DeerFlow names it after the
// assistant: the lead agent's trace is "lead-agent", a custom agent keeps its name.
func rootTraceName(sp ptrace.Span) string {
	attrs := sp.Attributes()
	if str(attrs, genai.AttrOperationName) == genai.OpInvokeAgent {
		switch name := str(attrs, genai.AttrAgentName); name {
		case genai.LeadAgentName:
			return defaultLeadTraceName
		case "":
		default:
			return name
		}
	}
	return sp.Name()
}

// Span shapes one span's attributes. t may be nil (a span shaped on its own), in which
// case only the observation-level attributes are written.
func Span(attrs pcommon.Map, t *traceInfo) {
	if t != nil {
		putStrIfAbsent(attrs, AttrTraceName, t.name)
		putStrIfAbsent(attrs, AttrSessionID, t.session)
		putStrIfAbsent(attrs, AttrUserID, t.user)
		if _, ok := attrs.Get(AttrTraceTags); !ok && len(t.tags) > 0 {
			genai.PutStrings(attrs, AttrTraceTags, t.tags)
		}
	}

	op := str(attrs, genai.AttrOperationName)
	putStrIfAbsent(attrs, AttrObservationType, ObservationType(op))

	if op == genai.OpChat {
		putStrIfAbsent(attrs, AttrObservationModel, firstStr(attrs, genai.AttrResponseModel, genai.AttrRequestModel))
		if u, ok := genai.UsageFromMap(attrs); ok {
			attrs.PutStr(AttrObservationUsage, UsageDetails(u))
		}
	}

	if caller := str(attrs, genai.AttrCaller); caller != "" {
		putStrIfAbsent(attrs, MetaCaller, caller)
		putStrIfAbsent(attrs, MetaCallerBucket, genai.CallerBucket(caller))
	}
	if status := str(attrs, genai.AttrMergeStatus); status != "" {
		putStrIfAbsent(attrs, MetaMergeStatus, status)
	}
	if su, ok := genai.SubagentUsageFromMap(attrs); ok {
		attrs.PutInt(MetaSubagentInput, su.Input)
		attrs.PutInt(MetaSubagentOutput, su.Output)
		attrs.PutInt(MetaSubagentTotal, su.Total())
		attrs.PutInt(MetaSubagentCacheRead, su.CacheRead)
		attrs.PutInt(MetaSubagentCacheCreation, su.CacheCreation)
		attrs.PutInt(MetaSubagentReasoning, su.Reasoning)
		if v, ok := attrs.Get(genai.AttrSubagentDispatches); ok {
			attrs.PutInt(MetaSubagentDispatches, v.Int())
		}
		if ids := genai.StringsFromMap(attrs, genai.AttrSubagentToolCallIDs); len(ids) > 0 {
			genai.PutStrings(attrs, MetaSubagentToolCallIDs, ids)
		}
	}
}

// ObservationType maps gen_ai.operation.name to a Langfuse observation type.
func ObservationType(op string) string {
	switch op {
	case genai.OpChat:
		return TypeGeneration
	case genai.OpInvokeAgent:
		return TypeAgent
	case genai.OpExecuteTool:
		return TypeTool
	default:
		return TypeSpan
	}
}

// Buckets are Langfuse's mutually exclusive usage buckets for one model call.
type Buckets struct {
	Input, CacheRead, CacheCreation, Output, Reasoning, Total int64
}

// UsageBuckets splits contract usage (input includes cache, output includes reasoning,
// CONTRACT §2) into Langfuse's exclusive buckets (vendor notes §1.8): input without
// cache, output without reasoning. Negative counts are treated as 0.
//
// A span whose cache counts exceed its input cannot be contract-normalised; it is what
// Anthropic reports raw (input_tokens without cache), so its input is taken as the
// uncached part rather than clamped to 0, which would lose those tokens.
func UsageBuckets(u genai.Usage) Buckets {
	b := Buckets{
		CacheRead:     max(u.CacheRead, 0),
		CacheCreation: max(u.CacheCreation, 0),
		Reasoning:     max(u.Reasoning, 0),
	}
	in, out := max(u.Input, 0), max(u.Output, 0)
	if b.Input = in - b.CacheRead - b.CacheCreation; b.Input < 0 {
		b.Input = in
	}
	if b.Output = out - b.Reasoning; b.Output < 0 {
		b.Output = out
	}
	b.Total = b.Input + b.CacheRead + b.CacheCreation + b.Output + b.Reasoning
	return b
}

// UsageDetails renders the buckets as the JSON object string Langfuse reads from
// langfuse.observation.usage_details (a flat map of non-negative integers). input,
// output and total are always present; detail buckets only when non-zero. Built by hand
// in a fixed key order: it runs for every chat span of every batch.
func UsageDetails(u genai.Usage) string {
	b := UsageBuckets(u)
	buf := make([]byte, 0, 128)
	buf = append(buf, '{')
	buf = appendKV(buf, UsageInput, b.Input, false)
	if b.CacheRead != 0 {
		buf = appendKV(buf, UsageCacheRead, b.CacheRead, true)
	}
	if b.CacheCreation != 0 {
		buf = appendKV(buf, UsageCacheCreation, b.CacheCreation, true)
	}
	buf = appendKV(buf, UsageOutput, b.Output, true)
	if b.Reasoning != 0 {
		buf = appendKV(buf, UsageReasoning, b.Reasoning, true)
	}
	buf = appendKV(buf, UsageTotal, b.Total, true)
	buf = append(buf, '}')
	return string(buf)
}

func appendKV(buf []byte, key string, v int64, comma bool) []byte {
	if comma {
		buf = append(buf, ',')
	}
	buf = append(buf, '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendInt(buf, v, 10)
}

func str(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

func firstStr(m pcommon.Map, keys ...string) string {
	for _, k := range keys {
		if s := str(m, k); s != "" {
			return s
		}
	}
	return ""
}

func putStrIfAbsent(m pcommon.Map, key, value string) {
	if value == "" {
		return
	}
	if _, ok := m.Get(key); !ok {
		m.PutStr(key, value)
	}
}
