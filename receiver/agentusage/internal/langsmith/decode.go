package langsmith

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// ErrBody is a request-level error: nothing in the body could be used.
var ErrBody = errors.New("request body")

// DecodeRun decodes the body of POST /runs or PATCH /runs/{id}. For a PATCH, pathID
// is the id from the URL; it wins over a different id in the body.
func DecodeRun(body []byte, patch bool, pathID string) (Op, error) {
	m, err := decodeObject(body)
	if err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	if patch && pathID != "" {
		m["id"] = pathID
	}
	r, err := parseRun(m, patch)
	if err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	return Op{Patch: patch, Run: r, Field: "run"}, nil
}

// DecodeBatch decodes POST /runs/batch: {"post": [run...], "patch": [run...]}. Bad
// items are reported and skipped; the rest are returned.
func DecodeBatch(body []byte) ([]Op, []ItemError, error) {
	if ops, err := decodeBatchScan(body); err == nil {
		return ops, nil, nil
	}
	if ops, err := decodeBatchFast(body); err == nil {
		return ops, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil || env == nil {
		return nil, nil, fmt.Errorf("%w: expected a JSON object {\"post\": [...], \"patch\": [...]}", ErrBody)
	}
	var ops []Op
	var errs []ItemError
	for _, kind := range []string{"post", "patch"} {
		v, ok := env[kind]
		if !ok || v == nil {
			continue
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s must be an array of runs", ErrBody, kind)
		}
		for i, item := range arr {
			field := fmt.Sprintf("%s[%d]", kind, i)
			m, ok := item.(map[string]any)
			if !ok {
				errs = append(errs, ItemError{Field: field, Message: "must be a JSON object"})
				continue
			}
			r, err := parseRun(m, kind == "patch")
			if err != nil {
				errs = append(errs, ItemError{Field: field, Message: err.Error()})
				continue
			}
			ops = append(ops, Op{Patch: kind == "patch", Run: r, Field: field})
		}
	}
	return ops, errs, nil
}

// splitFields are the run fields the SDKs send as their own multipart parts.
var splitFields = map[string]bool{"inputs": true, "outputs": true, "events": true, "extra": true, "error": true, "serialized": true}

// DecodeMultipart decodes POST /runs/multipart. Parts are named post.<id>,
// patch.<id> (the run without its big fields) and post.<id>.<field> (one field
// each); attachment.* and feedback.* parts are ignored. A run with a bad part is
// reported and skipped.
func DecodeMultipart(contentType string, body io.Reader) ([]Op, []ItemError, error) {
	var hint int64
	if l, ok := body.(interface{ Len() int }); ok {
		hint = int64(l.Len())
	}
	return DecodeMultipartSize(contentType, body, hint)
}

// DecodeMultipartSize is DecodeMultipart for a body of about sizeHint bytes (the
// request's Content-Length; 0 if unknown), read into one buffer of that size.
func DecodeMultipartSize(contentType string, body io.Reader, sizeHint int64) ([]Op, []ItemError, error) {
	ops, errs, _, err := decodeMultipart(contentType, body, sizeHint, nil)
	return ops, errs, err
}

// readBufs recycles multipart read buffers (see DecodeMultipartPooled).
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// partBufs recycles the part lists of split multipart bodies.
var partBufs = sync.Pool{New: func() any { return new([]mpPart) }}

// maxPooledParts: longer part lists are left to the garbage collector.
const maxPooledParts = 1 << 14

// maxPooledBuf: bigger buffers are left to the garbage collector.
const maxPooledBuf = 4 << 20

// DecodeMultipartPooled is DecodeMultipartSize reading into a recycled buffer. The
// ops point into that buffer (raw inputs, outputs, extra; runs parked by Plan.Commit
// are copied out), so the caller must call release, exactly once, only when it no
// longer uses the ops: after Commit and after building their spans.
func DecodeMultipartPooled(contentType string, body io.Reader, sizeHint int64) (ops []Op, errs []ItemError, release func(), err error) {
	bp := readBufs.Get().(*[]byte)
	ops, errs, buf, err := decodeMultipart(contentType, body, sizeHint, (*bp)[:0])
	release = func() {
		if cap(buf) > 0 && cap(buf) <= maxPooledBuf {
			*bp = buf[:0]
			readBufs.Put(bp)
		}
	}
	return ops, errs, release, err
}

func decodeMultipart(contentType string, body io.Reader, sizeHint int64, buf []byte) ([]Op, []ItemError, []byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, nil, buf, fmt.Errorf("%w: Content-Type must be multipart/form-data with a boundary", ErrBody)
	}
	// The body is read whole and split by hand (see multipart.go); layouts the
	// splitter does not handle go to mime/multipart over the same bytes, followed by
	// the read error if reading stopped on one (a body over the size limit).
	data, rerr := readAll(buf, body, sizeHint)
	if rerr == nil {
		pp := partBufs.Get().(*[]mpPart)
		parts, ok := splitMultipart((*pp)[:0], data, params["boundary"])
		var ops []Op
		if ok {
			ops, ok = decodeMultipartScan(parts)
		}
		// the ops hold slices of data, never of parts: the part list can be reused
		if parts == nil { // the splitter gave up
			parts = *pp
		}
		clear(parts[:cap(parts)]) // also what a splitter that gave up appended
		if cap(parts) <= maxPooledParts {
			*pp = parts[:0]
			partBufs.Put(pp)
		}
		if ok {
			return ops, nil, data, nil
		}
		ops, errs, err := decodeMultipartMIME(params["boundary"], bytes.NewReader(data))
		return ops, errs, data, err
	}
	ops, errs, err := decodeMultipartMIME(params["boundary"], io.MultiReader(bytes.NewReader(data), errReader{rerr}))
	return ops, errs, data, err
}

// decodeMultipartMIME is the general multipart decoder, over mime/multipart and
// generic JSON maps.
func decodeMultipartMIME(boundary string, body io.Reader) ([]Op, []ItemError, error) {
	mr := multipart.NewReader(body, boundary)
	type key struct{ kind, id string }
	runs := map[key]map[string]any{}
	var order []key
	bad := map[key]string{}
	var errs []ItemError
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w: malformed multipart body: %v", ErrBody, err)
		}
		name := p.FormName()
		kind, rest, _ := strings.Cut(name, ".")
		if kind != "post" && kind != "patch" {
			_, _ = io.Copy(io.Discard, p)
			continue
		}
		id, field, _ := strings.Cut(rest, ".")
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, nil, fmt.Errorf("reading part %q: %w", name, err)
		}
		k := key{kind, id}
		if _, seen := runs[k]; !seen {
			runs[k] = map[string]any{}
			order = append(order, k)
		}
		if _, isBad := bad[k]; isBad {
			continue
		}
		if id == "" {
			bad[k] = fmt.Sprintf("part %q: missing run id", name)
			continue
		}
		switch field {
		case "inputs":
			// kept raw: decoded only for tool runs (see Run.RawInputs)
			runs[k][field] = json.RawMessage(data)
			continue
		case "", "outputs", "extra", "error":
		default:
			continue // events, serialized, unknown split fields: not used, not decoded
		}
		// json.Unmarshal (numbers as float64: exact for token counts and epoch
		// milliseconds) is much cheaper per part than a Decoder with UseNumber
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			bad[k] = fmt.Sprintf("part %q: invalid JSON: %v", name, err)
			continue
		}
		if field == "" {
			m, ok := v.(map[string]any)
			if !ok {
				bad[k] = fmt.Sprintf("part %q: must be a JSON object", name)
				continue
			}
			for fk, fv := range m {
				if _, set := runs[k][fk]; !set || !splitFields[fk] {
					runs[k][fk] = fv
				}
			}
			continue
		}
		runs[k][field] = v
	}
	var ops []Op
	for _, k := range order {
		field := k.kind + "." + k.id
		if msg, isBad := bad[k]; isBad {
			errs = append(errs, ItemError{Field: field, Message: msg})
			continue
		}
		m := runs[k]
		if _, ok := m["id"]; !ok {
			m["id"] = k.id
		}
		r, err := parseRun(m, k.kind == "patch")
		if err != nil {
			errs = append(errs, ItemError{Field: field, Message: err.Error()})
			continue
		}
		ops = append(ops, Op{Patch: k.kind == "patch", Run: r, Field: field})
	}
	// posts before patches, each in dotted order, so parents are seen first
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Patch != ops[j].Patch {
			return !ops[i].Patch
		}
		return false
	})
	return ops, errs, nil
}
