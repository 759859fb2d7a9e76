package langsmith

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/build"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/fielderr"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/ids"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

// runKey is one run field the decoder reads; every other member is ignored.
type runKey uint8

const (
	keyID runKey = iota
	keyTraceID
	keyDottedOrder
	keyParentRunID
	keyName
	keyRunType
	keySessionName
	keyStartTime
	keyEndTime
	keyInputs
	keyOutputs
	keyExtra
	keyError
	keyTags
	numKeys
)

var keyNames = [numKeys]string{"id", "trace_id", "dotted_order", "parent_run_id", "name", "run_type", "session_name",
	"start_time", "end_time", "inputs", "outputs", "extra", "error", "tags"}

// lookupKey matches a member name exactly (JSON names are case-sensitive, as a
// decoded map reads them).
func lookupKey(k []byte) (runKey, bool) {
	switch string(k) {
	case "id":
		return keyID, true
	case "trace_id":
		return keyTraceID, true
	case "dotted_order":
		return keyDottedOrder, true
	case "parent_run_id":
		return keyParentRunID, true
	case "name":
		return keyName, true
	case "run_type":
		return keyRunType, true
	case "session_name":
		return keySessionName, true
	case "start_time":
		return keyStartTime, true
	case "end_time":
		return keyEndTime, true
	case "inputs":
		return keyInputs, true
	case "outputs":
		return keyOutputs, true
	case "extra":
		return keyExtra, true
	case "error":
		return keyError, true
	case "tags":
		return keyTags, true
	}
	return 0, false
}

// runDecoder fills one Run from the members of JSON objects (a batch item, a
// multipart run part and its field parts). As in a decoded map, the last of duplicate
// members wins, errors included: each field keeps only the error of the value it
// ended with.
type runDecoder struct {
	r      *Run
	idSeen bool // "id" was present (even null)
	errs   []keyErr
	// last holds the string fields of the request's previous run: siblings mostly
	// share their trace, parent, name and type, and reusing the string saves an
	// allocation per field. nil: no reuse.
	last *[numKeys]string
}

// keyErr is what is wrong with one field.
type keyErr struct {
	k   runKey
	msg string
}

// object reads the run object at b[i] == '{' (b is w's body), checking it on the way,
// and returns the index after it.
func (d *runDecoder) object(w *rawjson.Walk, b []byte, i int) (int, error) {
	return w.Members(i, func(k []byte, at int) (int, error) {
		end, err := w.Value(at)
		if err == nil {
			if key, ok := lookupKey(k); ok {
				d.set(key, b[at:end])
			}
		}
		return end, err
	})
}

func (d *runDecoder) fail(k runKey, msg string) {
	d.errs = append(d.errs, keyErr{k, msg})
}

// set sets field k from its checked raw value.
func (d *runDecoder) set(k runKey, val []byte) {
	r := d.r
	if len(d.errs) > 0 { // a later duplicate replaces the value, and its error
		d.clear(k)
	}
	null := string(val) == "null"
	str := func(dst *string) {
		*dst = ""
		if null {
			return
		}
		if d.last != nil && len(val) >= 2 && val[0] == '"' && string(val[1:len(val)-1]) == d.last[k] &&
			bytes.IndexByte(val, '\\') < 0 {
			*dst = d.last[k]
			return
		}
		s, ok := rawjson.String(val)
		if !ok {
			d.fail(k, "must be a string")
			return
		}
		*dst = s
		if d.last != nil {
			d.last[k] = s
		}
	}
	// obj keeps a free-form JSON object as a slice of the body; null clears it
	obj := func(dst *[]byte) {
		*dst = nil
		if null {
			return
		}
		if !rawjson.IsObject(val) {
			d.fail(k, "must be a JSON object")
			return
		}
		*dst = val
	}
	tm := func(dst *time.Time) {
		t, err := timestamps.ParseRawTime(val)
		*dst = t
		if err != nil {
			d.fail(k, err.Error())
		}
	}
	switch k {
	case keyID:
		d.idSeen = true
		str(&r.ID)
	case keyTraceID:
		str(&r.TraceID)
	case keyDottedOrder:
		str(&r.DottedOrder)
	case keyParentRunID:
		str(&r.ParentRunID)
	case keyName:
		str(&r.Name)
	case keyRunType:
		str(&r.RunType)
	case keySessionName:
		str(&r.SessionName)
	case keyStartTime:
		tm(&r.Start)
	case keyEndTime:
		tm(&r.End)
	case keyInputs:
		obj(&r.inputs)
	case keyOutputs:
		obj(&r.outputs)
	case keyExtra:
		obj(&r.extra)
	case keyError:
		// a string is the message; anything else (an object the SDK serialised) is
		// kept as its JSON text
		r.Error = ""
		switch {
		case null:
		case val[0] == '"':
			r.Error, _ = rawjson.String(val)
		default:
			var b bytes.Buffer
			if json.Compact(&b, val) == nil {
				r.Error = b.String()
			} else {
				r.Error = string(val)
			}
		}
	case keyTags:
		r.Tags = nil
		if null {
			return
		}
		if !rawjson.IsArray(val) {
			d.fail(k, "must be an array of strings")
			return
		}
		tags := make([]string, 0, 4)
		noDoc.Elems(val, func(e []byte) bool {
			if s, ok := rawjson.String(e); ok { // other elements are not tags: skipped
				tags = append(tags, s)
			}
			return true
		})
		r.Tags = tags
	}
}

// finish validates the ids and completes the run; false when a field is bad (err
// names them).
func (d *runDecoder) finish(patch bool) bool {
	r := d.r
	if !d.has(keyID) {
		switch {
		case r.ID == "":
			d.fail(keyID, "is required")
		case !ids.IsUUIDOrHex(r.ID):
			d.fail(keyID, fmt.Sprintf("must be a UUID, got %q", build.Truncate(r.ID, 64)))
		}
	}
	if !d.has(keyTraceID) && r.TraceID != "" && !ids.IsUUIDOrHex(r.TraceID) {
		d.fail(keyTraceID, "must be a UUID")
	}
	d.checkLabels()
	r.Posted = !patch
	return len(d.errs) == 0
}

// labelMetadata are the metadata keys whose values can become metric labels (the
// model, provider, caller and agent name the translator reads).
var labelMetadata = []string{"ls_model_name", "ls_provider", "caller", genai.AttrCaller, "lc_agent_name", "agent_name"}

// checkLabels refuses a run whose fields that can become metric labels (its name and
// session, a caller tag, the model, provider, caller and agent in extra and the
// response's model in outputs) are longer than genai.MaxLabelBytes. Only an object
// longer than the bound can hold such a value, so the common small extra is not read.
func (d *runDecoder) checkLabels() {
	r := d.r
	// sub is the path of the value inside field k (nil for the field itself), built
	// only for an error
	label := func(k runKey, v string, sub func() string) {
		if len(v) <= genai.MaxLabelBytes || d.has(k) {
			return
		}
		path := ""
		if sub != nil {
			path = sub()
		}
		var fe *fielderr.Error
		if errors.As(fielderr.Label(path, v), &fe) {
			msg := fe.Err.Error()
			if sub != nil {
				msg = fe.Error()
			}
			d.fail(k, msg)
		}
	}
	label(keyName, r.Name, nil)
	label(keySessionName, r.SessionName, nil)
	for i, t := range r.Tags {
		if genai.CallerFromTags([]string{t}) != "" {
			label(keyTags, t, func() string { return "[" + strconv.Itoa(i) + "]" })
		}
	}
	if len(r.extra) > genai.MaxLabelBytes {
		ex := r.extraView()
		md, _ := ex.child("metadata")
		for _, k := range labelMetadata {
			label(keyExtra, md.firstString(k), func() string { return "metadata." + k })
		}
		inv, _ := ex.child("invocation_params")
		for _, k := range [...]string{"model", "model_name"} {
			label(keyExtra, inv.firstString(k), func() string { return "invocation_params." + k })
		}
	}
	if len(r.outputs) > genai.MaxLabelBytes {
		label(keyOutputs, r.outputView().findString("model_name"), func() string { return "model_name" })
	}
}

// err names every bad field as prefix.field (just field when prefix is empty), in the
// order of keyNames.
func (d *runDecoder) err(prefix string) error {
	if len(d.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(d.errs, func(a, b keyErr) int { return int(a.k) - int(b.k) })
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = fielderr.New(fieldPath(prefix, keyNames[e.k]), "%s", e.msg)
	}
	return errors.Join(errs...)
}

// has reports whether field k already has an error.
func (d *runDecoder) has(k runKey) bool {
	for _, e := range d.errs {
		if e.k == k {
			return true
		}
	}
	return false
}

// clear forgets the error of field k (a value set from elsewhere replaces it).
func (d *runDecoder) clear(k runKey) {
	d.errs = slices.DeleteFunc(d.errs, func(e keyErr) bool { return e.k == k })
}

func fieldPath(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}
