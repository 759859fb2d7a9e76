package langsmith

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
)

// ErrBody is a request-level error: nothing in the body could be used.
var ErrBody = errors.New("request body")

// Every endpoint decodes alike: runDecoder reads the runs out of the body (or of each
// multipart part) while internal/rawjson's checking walk (rawjson.Walk) checks it, in
// one pass — exactly what encoding/json accepts, an error naming the byte where the
// body breaks. JSON that is not well-formed fails the request (or, in a multipart
// body, the run of that part); a well-formed item with a bad field is reported by name
// and skipped.

// DecodeRun decodes the body of POST /runs or PATCH /runs/{id}. For a PATCH, pathID
// is the id from the URL; it wins over a different id in the body.
func DecodeRun(body []byte, patch bool, pathID string) (Op, error) {
	var op Op
	if err := decodeRunDoc(body, &op.Run, pathID, patch, ""); err != nil {
		return Op{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	op.Patch = patch
	return op, nil
}

// decodeRunDoc decodes a document holding one run object into r (a POST /runs body,
// a multipart run part). pathID, when set, is the run's id whatever the object says.
func decodeRunDoc(doc []byte, r *Run, pathID string, patch bool, prefix string) error {
	d := runDecoder{r: r}
	if err := d.doc(doc); err != nil {
		return err
	}
	if pathID != "" {
		r.ID = pathID
		d.clear(keyID)
	}
	d.finish(patch)
	return d.err(prefix)
}

// doc reads a document that must hold one run object.
func (d *runDecoder) doc(doc []byte) error {
	w := rawjson.NewWalk(doc)
	i := w.SkipSpace(0)
	if i >= len(doc) || doc[i] != '{' {
		if err := rawjson.Validate(doc); err != nil {
			return err
		}
		return errors.New("must be a JSON object (one run)")
	}
	end, err := d.object(&w, doc, i)
	if err != nil {
		return err
	}
	return w.End(end)
}

// DecodeBatch decodes POST /runs/batch: {"post": [run...], "patch": [run...]}. Bad
// items are reported and skipped; the rest are returned, posts first. The body is
// checked while it is read (one pass).
func DecodeBatch(body []byte) ([]Op, []ItemError, error) {
	w := rawjson.NewWalk(body)
	i := w.SkipSpace(0)
	if i >= len(body) || body[i] != '{' {
		if err := rawjson.Validate(body); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrBody, err)
		}
		return nil, nil, fmt.Errorf("%w: expected a JSON object {\"post\": [...], \"patch\": [...]}", ErrBody)
	}
	// one group per kind; as in a decoded map, a repeated "post" replaces the first
	var groups [2]struct {
		ops  []Op
		errs []ItemError
		bad  error
	}
	groups[0].ops = newOps(len(body)/512 + 8)
	var last [numKeys]string
	end, err := w.Members(i, func(k []byte, at int) (int, error) {
		g := 0
		switch string(k) {
		case "post":
		case "patch":
			g = 1
		default:
			return w.Value(at)
		}
		kind := [2]string{"post", "patch"}[g]
		grp := &groups[g]
		clear(grp.ops)
		grp.ops, grp.errs, grp.bad = grp.ops[:0], nil, nil
		switch {
		case body[at] == 'n':
			return w.Value(at)
		case body[at] != '[':
			grp.bad = fmt.Errorf("%w: %s must be an array of runs", ErrBody, kind)
			return w.Value(at)
		}
		n := 0
		return w.Elements(at, func(at int) (int, error) {
			idx := n
			n++
			if body[at] != '{' {
				end, err := w.Value(at)
				if err == nil {
					field := itemField(kind, idx)
					grp.errs = append(grp.errs, ItemError{Field: field, Message: field + ": must be a JSON object"})
				}
				return end, err
			}
			grp.ops = append(grp.ops, Op{Patch: g == 1})
			op := &grp.ops[len(grp.ops)-1]
			d := runDecoder{r: &op.Run, last: &last}
			end, err := d.object(&w, body, at)
			if err != nil {
				return 0, err
			}
			if !d.finish(g == 1) {
				field := itemField(kind, idx)
				grp.errs = append(grp.errs, ItemError{Field: field, Message: d.err(field).Error()})
				grp.ops[len(grp.ops)-1] = Op{}
				grp.ops = grp.ops[:len(grp.ops)-1]
			}
			return end, nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBody, err)
	}
	if err := w.End(end); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBody, err)
	}
	for _, g := range groups {
		if g.bad != nil {
			return nil, nil, g.bad
		}
	}
	ops := append(groups[0].ops, groups[1].ops...)
	errs := append(groups[0].errs, groups[1].errs...)
	return ops, errs, nil
}

// DecodeBatchPooled is DecodeBatch for a body read from body (about sizeHint bytes,
// the request's Content-Length; 0 if unknown) into a recycled buffer. As with
// DecodeMultipartPooled, the ops point into that buffer: call release, exactly once,
// when the ops are no longer used. A read error (a body over the size limit) is
// returned as it is, not as ErrBody.
func DecodeBatchPooled(body io.Reader, sizeHint int64) (ops []Op, errs []ItemError, release func(), err error) {
	bp := readBufs.Get().(*[]byte)
	data, rerr := readAll((*bp)[:0], body, sizeHint)
	release = func() {
		if cap(data) > 0 && cap(data) <= maxPooledBuf {
			*bp = data[:0]
			readBufs.Put(bp)
		}
	}
	if rerr != nil {
		return nil, nil, release, fmt.Errorf("reading the body: %w", rerr)
	}
	ops, errs, err = DecodeBatch(data)
	return ops, errs, release, err
}

func itemField(kind string, i int) string { return kind + "[" + strconv.Itoa(i) + "]" }

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
