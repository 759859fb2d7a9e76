// Package ingest sends LangSmith runs: multipart and batch bodies, batches bounded by
// /info's batch_ingest_config, compression, and the vendor's status-code semantics
// (../shared/vendors/langfuse-langsmith.md §2.3, §2.5, §2.6).
package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/textproto"
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
}

// Size is the uncompressed payload size of the run, what /info's size_limit_bytes bounds.
func (e *Encoded) Size() int {
	return len(e.Head) + len(e.Inputs) + len(e.Outputs) + len(e.Extra) + len(e.Error)
}

// Encode serialises a run.
func Encode(r *runtree.Run) (Encoded, error) {
	e := Encoded{ID: r.Head.ID, Source: r.Source}
	var err error
	if e.Head, err = json.Marshal(&r.Head); err != nil {
		return e, fmt.Errorf("encode run %s: %w", r.Head.ID, err)
	}
	if e.Inputs, err = json.Marshal(&r.Inputs); err != nil {
		return e, fmt.Errorf("encode inputs of run %s: %w", r.Head.ID, err)
	}
	if e.Outputs, err = json.Marshal(&r.Outputs); err != nil {
		return e, fmt.Errorf("encode outputs of run %s: %w", r.Head.ID, err)
	}
	if e.Extra, err = json.Marshal(&r.Extra); err != nil {
		return e, fmt.Errorf("encode extra of run %s: %w", r.Head.ID, err)
	}
	if r.Error != "" {
		if e.Error, err = json.Marshal(r.Error); err != nil {
			return e, fmt.Errorf("encode error of run %s: %w", r.Head.ID, err)
		}
	}
	return e, nil
}

// Limits bound one request: at most MaxRuns runs and MaxBytes uncompressed bytes. A run
// larger than MaxBytes on its own is still sent, alone: splitting cannot help it and the
// server's answer (413 or 4xx) is then reported for that run only.
type Limits struct {
	MaxRuns  int
	MaxBytes int
}

// Fallbacks when /info is unreachable or silent: the JS SDK's 100 operations and the
// Python/Go SDKs' 20 MiB (vendor notes §2.3).
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

// WriteMultipart writes runs as a multipart/form-data body ("post.<id>" plus one part per
// split-out field, each application/json with its length) and returns the content type.
func WriteMultipart(buf *bytes.Buffer, runs []Encoded) (string, error) {
	w := multipart.NewWriter(buf)
	for i := range runs {
		r := &runs[i]
		name := "post." + r.ID
		if err := writePart(w, name, r.Head); err != nil {
			return "", err
		}
		for _, p := range [...]struct {
			suffix string
			body   []byte
		}{{".inputs", r.Inputs}, {".outputs", r.Outputs}, {".extra", r.Extra}, {".error", r.Error}} {
			if p.body == nil {
				continue
			}
			if err := writePart(w, name+p.suffix, p.body); err != nil {
				return "", err
			}
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("close multipart body: %w", err)
	}
	return w.FormDataContentType(), nil
}

func writePart(w *multipart.Writer, name string, body []byte) error {
	h := make(textproto.MIMEHeader, 3)
	h.Set("Content-Disposition", `form-data; name="`+name+`"`)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	pw, err := w.CreatePart(h)
	if err != nil {
		return fmt.Errorf("multipart part %s: %w", name, err)
	}
	if _, err := pw.Write(body); err != nil {
		return fmt.Errorf("multipart part %s: %w", name, err)
	}
	return nil
}

// WriteBatch writes runs as a /runs/batch body {"post":[run,...]}: each full run is the
// head object with the split-out fields spliced back in.
func WriteBatch(buf *bytes.Buffer, runs []Encoded) {
	buf.WriteString(`{"post":[`)
	for i := range runs {
		r := &runs[i]
		if i > 0 {
			buf.WriteByte(',')
		}
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
	buf.WriteString(`]}`)
}
