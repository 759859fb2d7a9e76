package runtree

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
)

// OTel exception event names (semconv), read to build a failed run's error text.
const (
	eventException        = "exception"
	attrExceptionMessage  = "exception.message"
	attrExceptionType     = "exception.type"
	attrExceptionStack    = "exception.stacktrace"
	otherSemconvLLMOpText = "text_completion"
	otherSemconvLLMOpGen  = "generate_content"
	otherSemconvEmbedOp   = "embeddings"
)

// unnamed names runs of spans that have neither a name nor an operation.
const unnamed = "span"

// Orphan reasons written to extra.metadata.orphan when a span's parent was not seen.
const (
	OrphanRerooted       = "rerooted"         // became the trace's root run
	OrphanAttachedToRoot = "attached_to_root" // hung under the trace's root run
)

// Mapper maps spans to runs. It remembers the ancestor chains of recently mapped traces
// (bounded by maxCachedSpans) so children exported in a later batch than their parent
// get the correct dotted_order. Safe for concurrent use.
//
// Ids: the span without a parent becomes the root run, id == trace_id == the OTel trace
// id as a UUID; every other run's id is derived from its span id (SpanUUID).
//
// A span whose parent is neither in the batch nor remembered (an orphan) cannot get its
// true chain: its ancestors' start times and ids are unknown. It then
//   - hangs directly under the trace's root run when one is known (the true root, or
//     the orphan that was re-rooted first), with orphan = attached_to_root; or
//   - becomes the root of a LangSmith trace of its own (id == trace_id == its SpanUUID),
//     with orphan = rerooted. Typical for a lead agent whose parent is a remote gateway
//     span that is never exported here. Using the span's own UUID, never the trace UUID,
//     means a true root that arrives later can never collide with it.
//
// A span that carries langsmith.span.dotted_order (LangSmith's SDKs and the agentmeter
// runtime set it when the span starts) is placed by it instead, whether or not its
// ancestors have been seen: its run id, trace_id and parent are the chain's last, first
// and last but one ids. One that is not well formed is ignored.
//
// extra.metadata.otel.parent_span_id always keeps the real parent.
type Mapper struct {
	project string
	mu      sync.Mutex
	cache   *chainCache
	scratch []byte // dotted_order being built; guarded by mu
}

// NewMapper returns a Mapper for runs of the given LangSmith project that remembers at
// most maxCachedSpans spans' chains between batches.
func NewMapper(project string, maxCachedSpans int) *Mapper {
	return &Mapper{project: project, cache: newChainCache(maxCachedSpans)}
}

// CachedSpans is the number of spans whose chains are remembered.
func (m *Mapper) CachedSpans() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cache.Len()
}

type spanInfo struct {
	ref     SpanRef
	span    ptrace.Span
	res     pcommon.Resource
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	parent  pcommon.SpanID
	start   int64 // unix micros
	end     int64 // unix micros, never before start

	// resolved
	done, visiting bool
	entry          chainEntry
	parentRunID    string
	orphan         string
	// invented: its place comes from an orphan's path here (its ancestors are not
	// known), not from its trace as LangSmith holds it
	invented bool
	version  vendorhttp.Version // Rev > 0: a re-emission, an update of a run posted before
}

// Map turns every span into a run. Spans without a valid trace or span id cannot be
// addressed in LangSmith and are skipped; their number is returned.
func (m *Mapper) Map(td ptrace.Traces) (runs []Run, skipped int) {
	runs, skipped, _ = m.mapBatch(td, false)
	return runs, skipped
}

// MapReusing is Map for a caller that is done with the runs soon (once they are
// encoded): release hands the runs back for the next batch, with the memory their
// metadata and tags were cut from; no run, nor anything read from one, may be used
// after it.
func (m *Mapper) MapReusing(td ptrace.Traces) (runs []Run, skipped int, release func()) {
	return m.mapBatch(td, true)
}

func (m *Mapper) mapBatch(td ptrace.Traces, pooled bool) (runs []Run, skipped int, release func()) {
	a := &batchArena{}
	if pooled {
		a = arenas.Get().(*batchArena)
	}
	infos := slices.Grow(a.infos[:0], td.SpanCount())
	byTrace := map[pcommon.TraceID][]int{}
	rss := td.ResourceSpans()
	for ri := 0; ri < rss.Len(); ri++ {
		rs := rss.At(ri)
		sss := rs.ScopeSpans()
		for si := 0; si < sss.Len(); si++ {
			spans := sss.At(si).Spans()
			for ki := 0; ki < spans.Len(); ki++ {
				sp := spans.At(ki)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					skipped++
					continue
				}
				start := int64(sp.StartTimestamp()) / 1000
				v := vendorhttp.VersionOf(vendorhttp.SpanKey{Trace: sp.TraceID(), Span: sp.SpanID()}, sp.Attributes())
				infos = append(infos, spanInfo{
					ref: SpanRef{Resource: ri, Scope: si, Span: ki}, span: sp, res: rs.Resource(),
					traceID: sp.TraceID(), spanID: sp.SpanID(), parent: sp.ParentSpanID(),
					start: start, end: max(int64(sp.EndTimestamp())/1000, start),
					version: v,
				})
				byTrace[sp.TraceID()] = append(byTrace[sp.TraceID()], len(infos)-1)
			}
		}
	}

	m.mu.Lock()
	for traceID, idxs := range byTrace {
		m.resolveTrace(traceID, idxs, infos)
	}
	m.cache.evict()
	m.mu.Unlock()

	a.infos = infos
	a.cut()
	runs = slices.Grow(a.runs[:0], len(infos))[:len(infos)]
	a.runs = runs
	for i := range infos {
		runs[i] = m.buildRun(&infos[i], a.strings[i], a)
	}
	if !pooled {
		return runs, skipped, nil
	}
	return runs, skipped, a.release
}

func (m *Mapper) resolveTrace(traceID pcommon.TraceID, idxs []int, infos []spanInfo) {
	tc := m.cache.get(traceID)
	local := make(map[pcommon.SpanID]int, len(idxs))
	for _, i := range idxs {
		local[infos[i].spanID] = i
	}
	// spans without a parent first, then earliest first: a true root in the batch is the
	// attachment point for its orphans, and otherwise the earliest orphan is re-rooted.
	slices.SortStableFunc(idxs, func(a, b int) int {
		ra, rb := infos[a].parent.IsEmpty(), infos[b].parent.IsEmpty()
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmpInt64(infos[a].start, infos[b].start)
	})
	traceUUID := dottedorder.TraceUUID(traceID)
	var resolve func(i int)
	resolve = func(i int) {
		s := &infos[i]
		if s.done {
			return
		}
		s.visiting = true
		defer func() { s.visiting, s.done = false, true }()

		// a span mapped before keeps its run's place: LangSmith holds the run there, and
		// a patch that named another trace_id or dotted_order would move it
		if e, buf, ok := tc.lookup(s.spanID, m.scratch); ok {
			m.scratch = buf
			s.entry, s.parentRunID, s.orphan = e, e.parentRunID, e.orphan
			return
		}
		// the emitter placed it when it started: its ancestors need not have come
		if d := genai.StringAttr(s.span.Attributes(), genai.AttrLSDottedOrder); d != "" {
			// a placement that names the trace's root run for a span other than the one
			// already posted as it would collide with it (409): placed as without one
			if e, ok := placedEntry(d); ok && !(e.runID == traceUUID && tc.trueRootSet && tc.trueRoot != s.spanID) {
				s.entry, s.parentRunID = e, e.parentRunID
				m.cache.putPlaced(tc, s.spanID, d)
				if e.parentRunID == "" {
					if s.parent.IsEmpty() && !tc.trueRootSet {
						tc.trueRoot, tc.trueRootSet = s.spanID, true
					}
					if !tc.rootSet {
						tc.root, tc.rootSpan, tc.rootSet = e, s.spanID, true
					}
				}
				return
			}
		}

		if s.parent.IsEmpty() && (!tc.trueRootSet || tc.trueRoot == s.spanID) {
			tc.trueRoot, tc.trueRootSet = s.spanID, true
			s.entry = chainEntry{runID: traceUUID, traceRunID: traceUUID, segMicros: s.start,
				dotted: dottedorder.Root(s.start, traceID)}
			tc.root, tc.rootSpan, tc.rootSet = s.entry, s.spanID, true
			m.cache.put(tc, s.spanID, cachedRun{seg: s.start, traceRun: true})
			return
		}
		runID := dottedorder.SpanUUID(s.spanID)
		var parent chainEntry
		var up pcommon.SpanID // the span of the run it hangs under
		found := false
		if !s.parent.IsEmpty() {
			if pi, ok := local[s.parent]; ok && !infos[pi].visiting {
				resolve(pi)
				parent, up, found = infos[pi].entry, s.parent, true
				s.invented = infos[pi].invented
			} else if e, buf, ok := tc.lookup(s.parent, m.scratch); ok {
				m.scratch = buf
				parent, up, found = e, s.parent, true
			}
		}
		if !found {
			s.invented = true
			if !tc.rootSet {
				s.orphan = OrphanRerooted
				s.entry = chainEntry{runID: runID, traceRunID: runID, segMicros: s.start,
					dotted: string(dottedorder.AppendSegment(nil, s.start, runID)), orphan: OrphanRerooted}
				if s.version.Rev > 0 {
					return // an update LangSmith places: nothing is learnt from it
				}
				tc.root, tc.rootSpan, tc.rootSet = s.entry, s.spanID, true
				m.cache.put(tc, s.spanID, cachedRun{seg: s.start, orphan: orphanCode(OrphanRerooted)})
				return
			}
			parent, up, s.orphan = tc.root, tc.rootSpan, OrphanAttachedToRoot
		}
		seg := max(s.start, parent.segMicros)
		buf := append(m.scratch[:0], parent.dotted...)
		buf = append(buf, '.')
		buf = dottedorder.AppendSegment(buf, seg, runID)
		m.scratch = buf
		s.entry = chainEntry{runID: runID, traceRunID: parent.traceRunID, dotted: string(buf), segMicros: seg,
			parentRunID: parent.runID, orphan: s.orphan}
		s.parentRunID = parent.runID
		if !s.invented || s.version.Rev == 0 {
			m.cache.put(tc, s.spanID, cachedRun{up: up, seg: seg, orphan: orphanCode(s.orphan)})
		}
	}
	for _, i := range idxs {
		resolve(i)
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *Mapper) buildRun(s *spanInfo, rs runStrings, a *batchArena) Run {
	sp := s.span
	attrs := sp.Attributes()
	op := genai.StringAttr(attrs, genai.AttrOperationName)
	if op == "" {
		op, _, _ = strings.Cut(sp.Name(), " ")
	}
	runType := RunType(op)
	name := sp.Name()
	if name == "" {
		name = op
	}
	if name == "" {
		name = unnamed // LangSmith requires a name
	}
	r := Run{Source: s.ref, Version: s.version}
	r.Head = Head{
		ID: s.entry.runID, TraceID: s.entry.traceRunID, DottedOrder: s.entry.dotted,
		ParentRunID: s.parentRunID, Name: name, RunType: runType,
		StartTime: rs.start, EndTime: rs.end,
		SessionName: m.project, Status: StatusSuccess,
		// a patch whose place was made up here leaves the run where LangSmith has it
		Unplaced: s.invented && r.Version.Rev > 0,
	}
	if p := genai.StringAttr(attrs, genai.AttrLSSessionName); p != "" {
		r.Head.SessionName = p // the run's own project, as LangSmith's OTel ingestion routes it
	}
	md := a.metadata(derivedEntries)
	md = append(md, StrKV(keyOTelTraceID, rs.traceHex), StrKV(keyOTelSpanID, rs.spanHex))
	if !s.parent.IsEmpty() {
		md = append(md, StrKV(keyOTelParentSpanID, rs.parentHex))
	}
	if s.orphan != "" && !r.Head.Unplaced { // an update LangSmith places keeps the run's mark
		md = append(md, StrKV(keyOrphan, s.orphan))
	}
	if v := genai.StringAttr(s.res.Attributes(), genai.AttrServiceName); v != "" {
		md = append(md, StrKV(genai.AttrServiceName, v))
	}
	// LangSmith threads group runs by metadata thread_id / session_id (docs/langsmith.md)
	if thread := genai.StringAttr(attrs, genai.AttrConversationID); thread != "" {
		md = append(md, StrKV(keyThreadID, thread), StrKV(keySessionID, thread))
	}
	if user := genai.StringAttr(attrs, genai.AttrEndUserID); user != "" {
		md = append(md, StrKV(keyUserID, user))
	}
	if caller := genai.StringAttr(attrs, genai.AttrCaller); caller != "" {
		md = append(md, StrKV(keyCaller, caller), StrKV(keyCallerBucket, genai.CallerBucket(caller)))
		r.Head.Tags = a.tag(caller)
	}
	if sub, ok := genai.SubagentUsageFromMap(attrs); ok {
		su := &SubagentUsage{Usage: usageMetadata(sub)}
		if sc, ok := genai.SubagentCostFromMap(attrs); ok {
			su.Cost = &sc
		}
		su.Dispatches, su.HasDispatches = attrs.Get(genai.AttrSubagentDispatches)
		su.ToolCallIDs = genai.StringsFromMap(attrs, genai.AttrSubagentToolCallIDs)
		// merged subagent usage is metadata only, never usage_metadata (docs/contract.md#exported-data), so
		// LangSmith's trace totals stay the sum of each call's own usage
		md = append(md, KV{Key: keySubagentUsage, Value: su})
	}

	var params Metadata
	switch runType {
	case TypeLLM, TypeEmbedding, TypeTool:
		params = a.metadata(paramEntries)
	}
	switch runType {
	case TypeLLM, TypeEmbedding:
		model := genai.StringAttr(attrs, genai.AttrRequestModel)
		if model == "" {
			model = genai.StringAttr(attrs, genai.AttrResponseModel)
		}
		if p := genai.StringAttr(attrs, genai.AttrProviderName); p != "" {
			md = append(md, StrKV(keyLSProvider, p))
		}
		if model != "" {
			md = append(md, StrKV(keyLSModelName, model))
			params = append(params, StrKV("model", model))
		}
		if v, ok := attrs.Get(genai.AttrRequestStream); ok && v.Type() == pcommon.ValueTypeBool {
			params = append(params, KV{Key: "stream", Value: v.Bool()})
		}
		if runType == TypeLLM {
			if u, ok := genai.UsageFromMap(attrs); ok {
				r.Outputs.UsageMetadata = usageMetadata(u)
				if c, _, ok := genai.CostFromMap(attrs); ok {
					r.Outputs.UsageMetadata.Cost = &c
				}
			}
		}
	case TypeTool:
		if t := genai.StringAttr(attrs, genai.AttrToolName); t != "" {
			params = append(params, StrKV("tool_name", t))
		}
	}
	r.Extra = Extra{Attrs: attrs, HasAttrs: true, Metadata: md, InvocationParams: params}
	r.Inputs.Messages = content(attrs, genai.AttrInputMessages)
	r.Inputs.SystemInstructions = content(attrs, genai.AttrSystemInstr)
	r.Outputs.Messages = content(attrs, genai.AttrOutputMessages)

	if sp.Status().Code() == ptrace.StatusCodeError {
		r.Head.Status = StatusError
		r.Error = errorText(sp)
	}
	return r
}

func usageMetadata(u genai.Usage) *UsageMetadata {
	return &UsageMetadata{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Total(),
		CacheRead: u.CacheRead, CacheCreation: u.CacheCreation, Reasoning: u.Reasoning}
}

// errorText prefers the exception event (message and stack), then the status message,
// then error.type, so a failed run always has a non-empty error.
func errorText(sp ptrace.Span) string {
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		ev := evs.At(i)
		if ev.Name() != eventException {
			continue
		}
		a := ev.Attributes()
		msg := genai.StringAttr(a, attrExceptionMessage)
		if t := genai.StringAttr(a, attrExceptionType); t != "" {
			if msg == "" {
				msg = t
			} else {
				msg = t + ": " + msg
			}
		}
		if st := genai.StringAttr(a, attrExceptionStack); st != "" {
			msg += "\n\n" + st
		}
		if msg != "" {
			return msg
		}
	}
	if msg := sp.Status().Message(); msg != "" {
		return msg
	}
	if t := genai.StringAttr(sp.Attributes(), genai.AttrErrorType); t != "" {
		return t
	}
	return "error"
}

// content returns an opt-in content attribute as JSON: semconv sends it as a JSON string,
// which is passed through when valid; anything else is sent as a JSON string.
func content(m pcommon.Map, key string) json.RawMessage {
	v, ok := m.Get(key)
	if !ok {
		return nil
	}
	if v.Type() == pcommon.ValueTypeStr {
		if s := v.Str(); json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
	}
	b, err := json.Marshal(v.AsRaw())
	if err != nil {
		return nil
	}
	return b
}
