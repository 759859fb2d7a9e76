package langfuse

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/record"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

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
	if err := checkLabels(o, prefix); err != nil {
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
// tag) are longer than genai.MaxLabelBytes; the error names the field in the event's
// body (prefix is the event's path, built only for an error).
func checkLabels(o Observation, prefix func() string) error {
	check := func(key func() string, v string) error {
		if len(v) <= genai.MaxLabelBytes {
			return nil
		}
		return fielderr.Label(prefix()+".body."+key(), v)
	}
	is := func(key string) func() string { return func() string { return key } }
	if err := check(is("model"), o.Model); err != nil {
		return err
	}
	if o.Kind != "generation" && o.Kind != "event" { // else the name is only a span's
		if err := check(is("name"), o.Name); err != nil {
			return err
		}
	}
	for _, k := range [...]struct{ name, field string }{{"caller", "metadata.caller"}, {"provider", "metadata.provider"}} {
		if s, ok := o.Metadata[k.name].(string); ok {
			if err := check(is(k.field), s); err != nil {
				return err
			}
		}
	}
	for i, t := range o.Tags {
		if genai.CallerFromTags([]string{t}) != "" {
			if err := check(func() string { return "tags[" + strconv.Itoa(i) + "]" }, t); err != nil {
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
