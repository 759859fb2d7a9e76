package langsmith

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"sync"
)

// ErrBody is a request-level error: nothing in the body could be used.
var ErrBody = errors.New("request body")

// Every endpoint decodes with the same scanner (rawjson.go): the body, or each
// multipart part, is checked whole, then its runs are read by runDecoder. JSON that is
// not well-formed fails the request (or, in a multipart body, the run of that part);
// a well-formed item with a bad field is reported by name and skipped.

// DecodeRun decodes the body of POST /runs or PATCH /runs/{id}. For a PATCH, pathID
// is the id from the URL; it wins over a different id in the body.
func DecodeRun(body []byte, patch bool, pathID string) (Op, error) {
	if err := validDoc(body); err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	obj := trimJSON(body)
	if !isObj(obj) {
		return Op{}, fmt.Errorf("%w: must be a JSON object (one run)", ErrBody)
	}
	var d runDecoder
	d.object(obj)
	if patch && pathID != "" {
		d.r.ID, d.errs[keyID] = pathID, ""
	}
	r, err := d.finish("", patch)
	if err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	return Op{Patch: patch, Run: r, Field: "run"}, nil
}

// DecodeBatch decodes POST /runs/batch: {"post": [run...], "patch": [run...]}. Bad
// items are reported and skipped; the rest are returned, posts first.
func DecodeBatch(body []byte) ([]Op, []ItemError, error) {
	if err := validDoc(body); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBody, err)
	}
	env := trimJSON(body)
	if !isObj(env) {
		return nil, nil, fmt.Errorf("%w: expected a JSON object {\"post\": [...], \"patch\": [...]}", ErrBody)
	}
	// one group per kind; as in a decoded map, a repeated "post" replaces the first
	var groups [2]struct {
		arr []byte
		set bool
	}
	var bad error
	eachField(env, func(k, v []byte) bool {
		g := 0
		switch string(k) {
		case "post":
		case "patch":
			g = 1
		default:
			return true
		}
		groups[g].arr, groups[g].set = v, true
		return true
	})
	n := 0
	for g, kind := range [2]string{"post", "patch"} {
		a := groups[g].arr
		if !groups[g].set || string(a) == "null" {
			groups[g].arr = nil
			continue
		}
		if !isArr(a) {
			bad = fmt.Errorf("%w: %s must be an array of runs", ErrBody, kind)
			break
		}
		n += countElems(a)
	}
	if bad != nil {
		return nil, nil, bad
	}
	ops := make([]Op, 0, n)
	var errs []ItemError
	for g, kind := range [2]string{"post", "patch"} {
		i := 0
		eachElem(groups[g].arr, func(e []byte) bool {
			field := kind + "[" + strconv.Itoa(i) + "]"
			i++
			if !isObj(e) {
				errs = append(errs, ItemError{Field: field, Message: field + ": must be a JSON object"})
				return true
			}
			var d runDecoder
			d.object(e)
			r, err := d.finish(field, g == 1)
			if err != nil {
				errs = append(errs, ItemError{Field: field, Message: err.Error()})
				return true
			}
			ops = append(ops, Op{Patch: g == 1, Run: r, Field: field})
			return true
		})
	}
	return ops, errs, nil
}

// countElems is the number of elements of a checked array (to size the ops once).
func countElems(arr []byte) int {
	n := 0
	eachElem(arr, func([]byte) bool { n++; return true })
	return n
}

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
	data, err := readAll(buf, body, sizeHint)
	if err != nil {
		return nil, nil, data, fmt.Errorf("reading the multipart body: %w", err)
	}
	// The body is split by hand (multipart.go); layouts the splitter does not handle
	// go to mime/multipart over the same bytes. Either way the parts are decoded alike.
	pp := partBufs.Get().(*[]mpPart)
	parts, ok := splitMultipart((*pp)[:0], data, params["boundary"])
	if !ok {
		if parts, err = mimeParts((*pp)[:0], data, params["boundary"]); err != nil {
			return nil, nil, data, err
		}
	}
	ops, errs := decodeParts(parts)
	// the ops hold slices of data (or of the fallback's part copies), never of parts
	clear(parts[:cap(parts)])
	if cap(parts) <= maxPooledParts {
		*pp = parts[:0]
		partBufs.Put(pp)
	}
	return ops, errs, data, nil
}
