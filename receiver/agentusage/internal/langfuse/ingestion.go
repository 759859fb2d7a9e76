package langfuse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/pending"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// ServiceName is service.name of spans built from legacy ingestion events.
const ServiceName = "langfuse"

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

// Success is one accepted event in the 207 answer.
type Success struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
}

// EventError is one refused event in the 207 answer (Langfuse's IngestionResponse).
type EventError struct {
	ID      string `json:"id"`
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// Response is Langfuse's 207 body.
type Response struct {
	Successes []Success    `json:"successes"`
	Errors    []EventError `json:"errors"`
}

// Event is one validated event.
type Event struct {
	ID     string
	Type   string
	Update bool
	Obs    Observation
	Ignore bool // accepted and dropped (score-create, sdk-log)
}

// DecodeIngestion parses {"batch": [event...]}. Each bad event becomes an error entry
// (status 400, message naming the field); good events are returned. A body that is not
// JSON, or not such an object, is refused as a whole.
//
// The body is validated once and then read in place (internal/rawjson): only the values
// the face keeps are decoded, where decoding every event into generic maps was most of
// this face's cost. rawjson accepts exactly what encoding/json accepts.
func DecodeIngestion(body []byte) ([]Event, []EventError, error) {
	doc, ok := rawjson.Parse(body)
	if !ok || !rawjson.IsObject(doc.Root()) {
		return nil, nil, fmt.Errorf("%w: expected a JSON object {\"batch\": [...]}", ErrBody)
	}
	arr, _ := doc.Get(doc.Root(), "batch")
	if !rawjson.IsArray(arr) {
		return nil, nil, fmt.Errorf("%w: batch must be an array of events", ErrBody)
	}
	n := 0
	doc.Elems(arr, func([]byte) bool { n++; return true })
	events := make([]Event, 0, n)
	var errs []EventError
	i := 0
	doc.Elems(arr, func(item []byte) bool {
		ev, err := parseEvent(doc, item, i)
		i++
		if err != nil {
			id := ev.ID
			if id == "" {
				id = "unknown"
			}
			errs = append(errs, EventError{ID: id, Status: 400, Message: err.Error()})
			return true
		}
		events = append(events, ev)
		return true
	})
	return events, errs, nil
}

var observationKinds = map[string]bool{
	"span": true, "generation": true, "event": true, "agent": true, "tool": true, "chain": true,
	"retriever": true, "evaluator": true, "embedding": true, "guardrail": true, "observation": true,
}

// Metadata keys the face reads (docs/agentusage.md); an observation keeps only these.
var metadataKeys = map[string]bool{
	"caller": true, "run_id": true, "tool_call_id": true, "provider": true,
	"response_tool_call_ids": true, "subagent_status": true,
}

// eventBody holds the members of an event's body the face reads, as raw JSON; the last
// of duplicate keys wins, as in a decoded map.
type eventBody struct {
	id, name, parentID, model, level, statusMsg, sessionID, userID, traceID, obsType []byte
	timestamp, startTime, endTime, metadata, tags, output, usageDetails, usage       []byte
}

func (b *eventBody) field(key []byte) *[]byte {
	switch string(key) {
	case "id":
		return &b.id
	case "name":
		return &b.name
	case "parentObservationId":
		return &b.parentID
	case "model":
		return &b.model
	case "level":
		return &b.level
	case "statusMessage":
		return &b.statusMsg
	case "sessionId":
		return &b.sessionID
	case "userId":
		return &b.userID
	case "traceId":
		return &b.traceID
	case "type":
		return &b.obsType
	case "timestamp":
		return &b.timestamp
	case "startTime":
		return &b.startTime
	case "endTime":
		return &b.endTime
	case "metadata":
		return &b.metadata
	case "tags":
		return &b.tags
	case "output":
		return &b.output
	case "usageDetails":
		return &b.usageDetails
	case "usage":
		return &b.usage
	}
	return nil
}

// parseEvent validates the i-th event, a value of doc.
func parseEvent(doc *rawjson.Doc, item []byte, i int) (Event, error) {
	prefix := func() string { return "batch[" + strconv.Itoa(i) + "]" }
	if !rawjson.IsObject(item) {
		return Event{}, fielderr.New(prefix(), "must be a JSON object")
	}
	var rawID, rawType, rawBody []byte
	doc.Fields(item, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			rawID = v
		case "type":
			rawType = v
		case "body":
			rawBody = v
		}
		return true
	})
	var ev Event
	ev.ID, _ = rawjson.String(rawID)
	if ev.ID == "" {
		return ev, fielderr.New(prefix()+".id", "is required")
	}
	ev.Type, _ = rawjson.String(rawType)
	if ev.Type == "" {
		return ev, fielderr.New(prefix()+".type", "is required")
	}
	switch ev.Type {
	case "score-create", "sdk-log":
		ev.Ignore = true
		return ev, nil
	}
	kind, action, ok := strings.Cut(ev.Type, "-")
	if !ok || (action != "create" && action != "update") || (kind != "trace" && !observationKinds[kind]) || (kind == "trace" && action != "create") {
		return ev, fielderr.New(prefix()+".type", "unknown event type %q", build.Truncate(ev.Type, 64))
	}
	if !rawjson.IsObject(rawBody) {
		return ev, fielderr.New(prefix()+".body", "must be a JSON object")
	}
	var body eventBody
	doc.Fields(rawBody, func(k, v []byte) bool {
		if dst := body.field(k); dst != nil {
			*dst = v
		}
		return true
	})
	ev.Update = action == "update"
	o := Observation{Kind: kind, IsTrace: kind == "trace", Created: !ev.Update}
	str := func(raw []byte, key string) (string, error) {
		if rawjson.IsNull(raw) {
			return "", nil
		}
		s, ok := rawjson.String(raw)
		if !ok {
			return "", fielderr.New(prefix()+".body."+key, "must be a string")
		}
		return s, nil
	}
	tm := func(raw []byte, key string) (time.Time, error) {
		t, err := timestamps.ParseRawTime(raw)
		if err != nil {
			return t, fielderr.New(prefix()+".body."+key, "%v", err)
		}
		return t, nil
	}
	var err error
	if o.ID, err = str(body.id, "id"); err != nil {
		return ev, err
	}
	if o.ID == "" {
		return ev, fielderr.New(prefix()+".body.id", "is required")
	}
	if len(o.ID) > 800 {
		return ev, fielderr.New(prefix()+".body.id", "is longer than 800 characters")
	}
	for _, f := range []struct {
		raw []byte
		key string
		dst *string
	}{
		{body.name, "name", &o.Name}, {body.parentID, "parentObservationId", &o.ParentID}, {body.model, "model", &o.Model},
		{body.level, "level", &o.Level}, {body.statusMsg, "statusMessage", &o.StatusMsg},
		{body.sessionID, "sessionId", &o.SessionID}, {body.userID, "userId", &o.UserID},
	} {
		if *f.dst, err = str(f.raw, f.key); err != nil {
			return ev, err
		}
	}
	if o.IsTrace {
		o.TraceID = o.ID
		if o.Start, err = tm(body.timestamp, "timestamp"); err != nil {
			return ev, err
		}
		o.End = o.Start
	} else {
		if o.TraceID, err = str(body.traceID, "traceId"); err != nil {
			return ev, err
		}
		if o.Start, err = tm(body.startTime, "startTime"); err != nil {
			return ev, err
		}
		if o.End, err = tm(body.endTime, "endTime"); err != nil {
			return ev, err
		}
		if o.Kind == "observation" {
			t, _ := rawjson.String(body.obsType)
			o.Kind = strings.ToLower(t)
			if o.Kind == "" {
				o.Kind = "span"
			}
		}
	}
	if !rawjson.IsNull(body.metadata) {
		if !rawjson.IsObject(body.metadata) {
			return ev, fielderr.New(prefix()+".body.metadata", "must be a JSON object")
		}
		o.Metadata = map[string]any{}
		doc.Fields(body.metadata, func(k, v []byte) bool {
			if metadataKeys[string(k)] {
				o.Metadata[string(k)] = rawjson.Value(v)
			}
			return true
		})
	}
	doc.Elems(body.tags, func(v []byte) bool {
		if s, ok := rawjson.String(v); ok {
			o.Tags = append(o.Tags, s)
		}
		return true
	})
	if err := checkLabels(o, prefix()+".body."); err != nil {
		return ev, err
	}
	if !rawjson.IsNull(body.output) {
		// kept raw (and copied off the request body) until a span needs the tool
		// call ids in it: most observations' output is never read
		o.Output = bytes.Clone(body.output)
	}
	if rawjson.IsObject(body.usageDetails) {
		o.Usage, o.HasUsage = usageFromDetailsJSON(body.usageDetails)
	} else if rawjson.IsObject(body.usage) {
		us, _ := rawjson.Value(body.usage).(map[string]any)
		o.Usage, o.HasUsage = usageFromLegacy(us)
	}
	ev.Obs = o
	return ev, nil
}

// checkLabels refuses an observation whose fields that can become metric labels (its
// model, a tool's or an agent's name, the caller and provider in its metadata, a caller
// tag) are longer than genai.MaxLabelBytes; the error names the field under prefix.
func checkLabels(o Observation, prefix string) error {
	if err := fielderr.Label(prefix+"model", o.Model); err != nil {
		return err
	}
	if o.Kind != "generation" && o.Kind != "event" { // else the name is only a span's
		if err := fielderr.Label(prefix+"name", o.Name); err != nil {
			return err
		}
	}
	for _, k := range []string{"caller", "provider"} {
		if s, ok := o.Metadata[k].(string); ok {
			if err := fielderr.Label(prefix+"metadata."+k, s); err != nil {
				return err
			}
		}
	}
	for i, t := range o.Tags {
		if genai.CallerFromTags([]string{t}) != "" {
			if err := fielderr.Label(prefix+"tags["+strconv.Itoa(i)+"]", t); err != nil {
				return err
			}
		}
	}
	return nil
}

// usageFromLegacy reads the deprecated usage object: {input, output, unit} (counts as
// Langfuse gives them) or {promptTokens, completionTokens}.
func usageFromLegacy(us map[string]any) (genai.Usage, bool) {
	if unit, _ := us["unit"].(string); unit != "" && unit != "TOKENS" {
		return genai.Usage{}, false
	}
	var u genai.Usage
	in, ok1 := record.Count(us["input"])
	out, ok2 := record.Count(us["output"])
	if !ok1 && !ok2 {
		in, ok1 = record.Count(us["promptTokens"])
		out, ok2 = record.Count(us["completionTokens"])
	}
	u.Input, u.Output = in, out
	return u, ok1 || ok2
}

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

// traceInfo is what observations need from their trace-create.
type traceInfo struct {
	Name, SessionID, UserID, Caller, RunID string
}

// Ingester turns events into spans, holding observations created without an end
// time until their update (or a timeout), like the LangSmith face does for runs.
//
// A trace-create has no end, yet its span is the root of the trace: emitting it at
// once would let subagentmerge see "root present, every parent present" and release
// the trace before the SDK's later batches (with the subagents) arrive. So the root
// span is held until its trace has been quiet for RootIdle (any event of the trace
// restarts the wait), then emitted; it carries no usage, so the delay costs nothing
// but latency.
type Ingester struct {
	pending *pending.Store[Observation]
	roots   *pending.Store[Observation]
	traces  *pending.Recent[traceInfo]
}

// RootIdle is how long a Langfuse trace must be quiet before its root span is emitted
// (at most the pending timeout).
const RootIdle = 2 * time.Second

// NewIngester returns an ingester that parks unfinished observations for timeout.
func NewIngester(timeout time.Duration, maxPending int) *Ingester {
	return &Ingester{
		pending: pending.NewStore[Observation](timeout, maxPending),
		roots:   pending.NewStore[Observation](min(RootIdle, timeout), maxPending),
		traces:  pending.NewRecent[traceInfo](maxPending),
	}
}

// Plan is the outcome of one batch; nothing changes in the ingester until Commit.
type Plan struct {
	Complete []Observation
	Park     []Observation
	// Roots are the batch's trace-creates (merged with held ones), held until quiet.
	Roots []Observation
	in    *Ingester
}

func entityKey(o Observation) string {
	if o.IsTrace {
		return "trace\x00" + o.ID
	}
	return "obs\x00" + o.ID
}

// Plan merges the batch's events per entity id (creates first, then updates, each by
// order of arrival, as Langfuse sorts them) with parked observations.
func (in *Ingester) Plan(events []Event) *Plan {
	sort.SliceStable(events, func(i, j int) bool { return !events[i].Update && events[j].Update })
	// one entry per entity, in order of first arrival; merged indexes it by entity key
	merged := make(map[string]int, len(events))
	batch := make([]Observation, 0, len(events))
	for _, ev := range events {
		if ev.Ignore {
			continue
		}
		k := entityKey(ev.Obs)
		if i, seen := merged[k]; seen {
			batch[i] = mergeObs(batch[i], ev.Obs)
			continue
		}
		var cur Observation
		var ok bool
		if ev.Obs.IsTrace {
			cur, ok = in.roots.Get(k)
		} else {
			cur, ok = in.pending.Get(k)
		}
		if ok {
			cur = mergeObs(cur, ev.Obs)
		} else {
			cur = ev.Obs
		}
		merged[k] = len(batch)
		batch = append(batch, cur)
	}
	// An observation also waits for its trace-create, which carries the session, user
	// and run that every span of the trace should have.
	known := map[string]bool{}
	for _, o := range batch {
		if o.IsTrace {
			known[o.ID] = true
		}
	}
	traceKnown := func(id string) bool {
		if known[id] {
			return true
		}
		_, ok := in.traces.Get(id)
		return ok
	}
	p := &Plan{in: in, Complete: make([]Observation, 0, len(batch))}
	for _, o := range batch {
		if o.IsTrace {
			p.Roots = append(p.Roots, o)
			continue
		}
		if o.finished() && traceKnown(o.TraceID) {
			p.Complete = append(p.Complete, o)
		} else {
			p.Park = append(p.Park, o)
		}
	}
	// observations parked earlier that only waited for a trace-create of this batch
	if len(known) > 0 {
		p.Complete = append(p.Complete, in.pending.Select(func(o Observation) bool {
			_, inBatch := merged[entityKey(o)]
			return known[o.TraceID] && o.finished() && !inBatch
		})...)
	}
	return p
}

// Build turns the complete observations into spans.
func (p *Plan) Build() ptrace.Traces {
	for _, r := range p.Roots { // their attributes reach observations of this batch
		p.in.rememberTrace(r)
	}
	return p.in.build(p.Complete)
}

func (in *Ingester) rememberTrace(o Observation) {
	runID, _ := o.Metadata["run_id"].(string)
	in.traces.Put(o.ID, traceInfo{Name: o.Name, SessionID: o.SessionID, UserID: o.UserID, Caller: genai.CallerFromTags(o.Tags), RunID: runID})
}

// Commit records the plan once the pipeline accepted its spans and returns
// observations evicted from a full store.
func (p *Plan) Commit(now time.Time) []Observation {
	for _, o := range p.Complete {
		p.in.pending.Remove(entityKey(o))
	}
	var evicted []Observation
	for _, o := range p.Park {
		evicted = append(evicted, p.in.pending.Put(entityKey(o), o, now)...)
	}
	for _, r := range p.Roots {
		evicted = append(evicted, p.in.roots.Put(entityKey(r), r, now)...)
		p.in.roots.Touch(entityKey(r), now)
	}
	touched, some := "", false // a batch's observations mostly share one trace
	for _, group := range [][]Observation{p.Complete, p.Park} {
		for _, o := range group {
			if some && o.TraceID == touched {
				continue
			}
			p.in.roots.Touch(rootKey(o.TraceID), now)
			touched, some = o.TraceID, true
		}
	}
	return evicted
}

func rootKey(traceID string) string { return entityKey(Observation{IsTrace: true, ID: traceID}) }

// Expired removes and returns observations parked longer than the timeout and trace
// roots quiet for RootIdle.
func (in *Ingester) Expired(now time.Time) []Observation {
	return append(in.pending.Expired(now), in.roots.Expired(now)...)
}

// Drain removes and returns every parked observation and held root.
func (in *Ingester) Drain() []Observation {
	return append(in.pending.Drain(), in.roots.Drain()...)
}

// Repark puts observations back after a refused flush.
func (in *Ingester) Repark(obs []Observation, now time.Time) []Observation {
	var evicted []Observation
	for _, o := range obs {
		if o.IsTrace {
			evicted = append(evicted, in.roots.Put(entityKey(o), o, now)...)
			continue
		}
		evicted = append(evicted, in.pending.Put(entityKey(o), o, now)...)
	}
	return evicted
}

// Pending is the number of parked observations and held roots.
func (in *Ingester) Pending() int { return in.pending.Len() + in.roots.Len() }

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

// StorageKey is the key under which a held observation or trace root is stored (the
// receiver's `storage`): one per entity, as the ingester holds them.
func StorageKey(o Observation) string { return entityKey(o) }

// Restore holds again observations and trace roots a previous process held (read back
// from storage at start): as Repark, and the roots' trace attributes are remembered,
// so observations of those traces complete as they would have before the restart.
func (in *Ingester) Restore(obs []Observation, now time.Time) []Observation {
	for _, o := range obs {
		if o.IsTrace {
			in.rememberTrace(o)
		}
	}
	return in.Repark(obs, now)
}
