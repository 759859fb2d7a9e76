// Package ingest sends LangSmith runs: multipart and batch bodies, batches bounded by
// /info's batch_ingest_config, compression, and the vendor's status-code semantics
// (docs/langsmith.md).
package ingest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/runtree"
)

// Encoded is one run serialised once, as the parts multipart ingestion wants; the batch
// body is spliced from the same bytes.
type Encoded struct {
	ID      string
	Head    []byte // run object without the split-out fields
	Inputs  []byte
	Outputs []byte
	Extra   []byte
	Error   []byte // JSON string, nil when the run did not fail
	Source  runtree.SpanRef
	// Patch sends the run as an update of the run posted before ("patch.<id>" parts, the
	// batch body's patch array) instead of as a new run.
	Patch bool
	// Unplaced is a patch without its place in its trace (runtree.Head.Unplaced): it goes
	// by itself to PATCH /runs/{id}.
	Unplaced bool
}

// Size is the uncompressed payload size of the run, what /info's size_limit_bytes bounds.
func (e *Encoded) Size() int {
	return len(e.Head) + len(e.Inputs) + len(e.Outputs) + len(e.Extra) + len(e.Error)
}

// EncodeAll serialises runs into one shared buffer, buf[:0] (reused when large enough);
// every part is a slice of it, so a batch costs at most one growing allocation. The
// returned buffer is what the parts point into: reuse it only when they are unused.
func EncodeAll(runs []runtree.Run, buf []byte) ([]Encoded, []byte) {
	type offsets struct{ start, head, in, out, extra, err int }
	offs := make([]offsets, len(runs))
	buf = buf[:0]
	for i := range runs {
		r := &runs[i]
		o := &offs[i]
		o.start = len(buf)
		buf = r.Head.AppendJSON(buf)
		o.head = len(buf)
		buf = r.Inputs.AppendJSON(buf)
		o.in = len(buf)
		buf = r.Outputs.AppendJSON(buf)
		o.out = len(buf)
		buf = r.Extra.AppendJSON(buf)
		o.extra = len(buf)
		if r.Error != "" {
			buf = runtree.AppendJSONString(buf, r.Error)
		}
		o.err = len(buf)
	}
	out := make([]Encoded, len(runs))
	for i := range runs {
		o := offs[i]
		e := &out[i]
		e.ID, e.Source, e.Patch = runs[i].Head.ID, runs[i].Source, runs[i].Version.Rev > 0
		e.Unplaced = runs[i].Head.Unplaced
		e.Head = buf[o.start:o.head:o.head]
		e.Inputs = buf[o.head:o.in:o.in]
		e.Outputs = buf[o.in:o.out:o.out]
		e.Extra = buf[o.out:o.extra:o.extra]
		if o.err > o.extra {
			e.Error = buf[o.extra:o.err:o.err]
		}
	}
	return out, buf
}

// Limits bound one request: at most MaxRuns runs and MaxBytes uncompressed bytes. A run
// larger than MaxBytes on its own is still sent, alone: splitting cannot help it and the
// server's answer (413 or 4xx) is then reported for that run only.
type Limits struct {
	MaxRuns  int
	MaxBytes int
}

// Fallbacks when /info is unreachable or silent: the JS SDK's 100 operations and the
// Python/Go SDKs' 20 MiB (docs/langsmith.md).
const (
	DefaultMaxRuns  = 100
	DefaultMaxBytes = 20 << 20
)

// partOverhead is a generous allowance for one multipart part's boundary line and
// headers (Content-Disposition with a UUID name, Content-Type, Content-Length).
const partOverhead = 240

// wireSize is the run's size in a multipart body.
func (e *Encoded) wireSize() int {
	parts := 4
	if e.Error != nil {
		parts++
	}
	return e.Size() + parts*partOverhead
}

// WireSize is the size Split counts for runs: their payloads plus a multipart
// allowance per part.
func WireSize(runs []Encoded) int {
	n := 0
	for i := range runs {
		n += runs[i].wireSize()
	}
	return n
}

// Split cuts runs into consecutive chunks within the limits, keeping order.
func Split(runs []Encoded, l Limits) [][]Encoded {
	if l.MaxRuns <= 0 {
		l.MaxRuns = DefaultMaxRuns
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	var out [][]Encoded
	start, size := 0, 0
	for i := range runs {
		s := runs[i].wireSize()
		if i > start && (i-start >= l.MaxRuns || size+s > l.MaxBytes) {
			out = append(out, runs[start:i])
			start, size = i, 0
		}
		size += s
	}
	if start < len(runs) {
		out = append(out, runs[start:])
	}
	return out
}

// WriteMultipart writes runs as a multipart/form-data body ("post.<id>", or "patch.<id>"
// for a patch, plus one part per split-out field named after it, each application/json
// with its Content-Length) and returns the content type. Written by hand: mime/multipart's per-part header map and Fprintf cost more than
// the JSON itself. The layout is what mime/multipart produces and parses.
func WriteMultipart(buf *bytes.Buffer, runs []Encoded) (string, error) {
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("multipart boundary: %w", err)
	}
	boundary := hex.EncodeToString(rnd[:])
	size := len(boundary) + 8
	for i := range runs {
		size += runs[i].wireSize() + 5*len(boundary)
	}
	buf.Grow(size)
	b := buf.AvailableBuffer()
	for i := range runs {
		r := &runs[i]
		op := opPost
		if r.Patch {
			op = opPatch
		}
		b = appendPart(b, boundary, op, r.ID, "", r.Head)
		b = appendPart(b, boundary, op, r.ID, ".inputs", r.Inputs)
		b = appendPart(b, boundary, op, r.ID, ".outputs", r.Outputs)
		b = appendPart(b, boundary, op, r.ID, ".extra", r.Extra)
		if r.Error != nil {
			b = appendPart(b, boundary, op, r.ID, ".error", r.Error)
		}
	}
	b = append(b, "--"...)
	b = append(b, boundary...)
	b = append(b, "--\r\n"...)
	buf.Write(b)
	return "multipart/form-data; boundary=" + boundary, nil
}

// Multipart operations: a part's name starts with one.
const (
	opPost  = "post"
	opPatch = "patch"
)

func appendPart(b []byte, boundary, op, id, suffix string, body []byte) []byte {
	b = append(b, "--"...)
	b = append(b, boundary...)
	b = append(b, "\r\nContent-Disposition: form-data; name=\""...)
	b = append(b, op...)
	b = append(b, '.')
	b = append(b, id...)
	b = append(b, suffix...)
	b = append(b, "\"\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	return append(b, "\r\n"...)
}

// WriteBatch writes runs as a /runs/batch body {"post":[run,...],"patch":[run,...]}
// (an array only when it has runs): each full run is the head object with the split-out
// fields spliced back in.
func WriteBatch(buf *bytes.Buffer, runs []Encoded) {
	buf.WriteByte('{')
	posts := writeBatchOp(buf, runs, opPost, false, false)
	writeBatchOp(buf, runs, opPatch, true, posts)
	buf.WriteByte('}')
}

// writeBatchOp writes the array of op (the runs whose Patch is patch), if it has any,
// after a comma when one was written before; it reports whether it wrote.
func writeBatchOp(buf *bytes.Buffer, runs []Encoded, op string, patch, comma bool) bool {
	n := 0
	for i := range runs {
		r := &runs[i]
		if r.Patch != patch {
			continue
		}
		switch {
		case n == 0 && comma:
			buf.WriteString(`,"` + op + `":[`)
		case n == 0:
			buf.WriteString(`"` + op + `":[`)
		default:
			buf.WriteByte(',')
		}
		n++
		writeRun(buf, r)
	}
	if n > 0 {
		buf.WriteByte(']')
	}
	return n > 0
}

// writeRun writes r as one JSON object: the head with the split-out fields spliced back in.
func writeRun(buf *bytes.Buffer, r *Encoded) {
	buf.Write(r.Head[:len(r.Head)-1]) // the head is a JSON object: drop its '}'
	buf.WriteString(`,"inputs":`)
	buf.Write(r.Inputs)
	buf.WriteString(`,"outputs":`)
	buf.Write(r.Outputs)
	buf.WriteString(`,"extra":`)
	buf.Write(r.Extra)
	if r.Error != nil {
		buf.WriteString(`,"error":`)
		buf.Write(r.Error)
	}
	buf.WriteByte('}')
}
