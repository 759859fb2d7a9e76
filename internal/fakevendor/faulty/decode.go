package faulty

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// maxDecoded bounds a decompressed body, so a hostile or broken one cannot exhaust memory.
const maxDecoded = 256 << 20

// decode returns the items of an ingest body: spans (id = trace id + span id) for
// Langfuse, runs (id = run id) for LangSmith.
func decode(face Face, h http.Header, body []byte) ([]Item, error) {
	raw, err := decompress(h.Get("Content-Encoding"), body)
	if err != nil {
		return nil, err
	}
	if face == LangSmith {
		return decodeLangSmith(h.Get("Content-Type"), raw)
	}
	return decodeOTLP(h.Get("Content-Type"), raw)
}

func decompress(encoding string, body []byte) ([]byte, error) {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", encoding)
	}
	out, err := io.ReadAll(io.LimitReader(r, maxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("decompress body: %w", err)
	}
	if len(out) > maxDecoded {
		return nil, errors.New("decompressed body over 256 MiB")
	}
	return out, nil
}

// decodeOTLP reads an OTLP/HTTP traces request (protobuf or JSON).
func decodeOTLP(ctype string, raw []byte) ([]Item, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if strings.HasPrefix(ctype, "application/json") {
		err = req.UnmarshalJSON(raw)
	} else {
		err = req.UnmarshalProto(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp body: %w", err)
	}
	return SpanItems(req.Traces()), nil
}

// SpanItems lists the spans of td as items: id = trace id/span id, tokens = own input +
// output usage (gen_ai.usage.*). Senders use it to count what they sent the same way.
func SpanItems(td ptrace.Traces) []Item {
	var out []Item
	for sp := range spaniter.All(td) {
		u, _ := genai.UsageFromMap(sp.Attributes())
		out = append(out, Item{ID: SpanID(sp), Tokens: u.Input + u.Output})
	}
	return out
}

// SpanID is the id a Langfuse face counts a span by.
func SpanID(sp ptrace.Span) string { return sp.TraceID().String() + "/" + sp.SpanID().String() }

// lsRun is the part of a LangSmith run the front reads.
type lsRun struct {
	ID      string `json:"id"`
	Outputs *struct {
		Usage *lsUsage `json:"usage_metadata"`
	} `json:"outputs"`
}

type lsUsage struct {
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
}

// decodeLangSmith reads /runs/multipart (parts "post.<id>" and "post.<id>.<field>") or
// /runs/batch ({"post":[run...]}) bodies.
func decodeLangSmith(ctype string, raw []byte) ([]Item, error) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return nil, fmt.Errorf("content type %q: %w", ctype, err)
	}
	if mt == "application/json" {
		var batch struct {
			Post  []lsRun `json:"post"`
			Patch []lsRun `json:"patch"`
		}
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, fmt.Errorf("batch body: %w", err)
		}
		var out []Item
		for _, r := range append(batch.Post, batch.Patch...) {
			if r.ID == "" {
				return nil, errors.New("batch body: a run without id")
			}
			out = append(out, Item{ID: r.ID, Tokens: r.usage()})
		}
		return out, nil
	}
	if mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, fmt.Errorf("unexpected content type %q", ctype)
	}
	mr := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
	tokens := map[string]int64{}
	var order []string
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("multipart body: %w", err)
		}
		name := p.FormName()
		op, rest, ok := strings.Cut(name, ".")
		if !ok || (op != "post" && op != "patch") || rest == "" {
			return nil, fmt.Errorf("multipart part %q", name)
		}
		id, field, _ := strings.Cut(rest, ".")
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("multipart part %q: %w", name, err)
		}
		switch field {
		case "":
			if _, seen := tokens[id]; !seen {
				order = append(order, id)
				tokens[id] = 0
			}
		case "outputs":
			var o struct {
				Usage *lsUsage `json:"usage_metadata"`
			}
			if err := json.Unmarshal(data, &o); err != nil {
				return nil, fmt.Errorf("multipart part %q: %w", name, err)
			}
			if o.Usage != nil {
				tokens[id] += o.Usage.Input + o.Usage.Output
			}
		}
	}
	out := make([]Item, 0, len(order))
	for _, id := range order {
		out = append(out, Item{ID: id, Tokens: tokens[id]})
	}
	return out, nil
}

func (r lsRun) usage() int64 {
	if r.Outputs == nil || r.Outputs.Usage == nil {
		return 0
	}
	return r.Outputs.Usage.Input + r.Outputs.Usage.Output
}
