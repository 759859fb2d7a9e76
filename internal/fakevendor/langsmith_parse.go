package fakevendor

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
	"regexp"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// decodeBody reads a request body, undoing its Content-Encoding (none, gzip or zstd).
func decodeBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	switch r.Header.Get("Content-Encoding") {
	case "":
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return io.ReadAll(zr)
	case "zstd":
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(raw, nil)
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", r.Header.Get("Content-Encoding"))
	}
}

// multipart part suffixes that carry a split-out run field
var splitFields = map[string]bool{"inputs": true, "outputs": true, "events": true, "extra": true, "error": true, "serialized": true}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func parseMultipart(ctype string, body []byte) (runOps, error) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return runOps{}, fmt.Errorf("content type %q is not multipart/form-data with a boundary", ctype)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	type opID struct{ op, id string }
	runs := map[opID]map[string]any{}
	var order []opID
	fields := map[opID]map[string]any{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return runOps{}, fmt.Errorf("multipart: %w", err)
		}
		name := p.FormName()
		// LangSmith's SDKs give a part's size in its media type (application/json; length=N)
		ct := p.Header.Get("Content-Type")
		mt, ctParams, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return runOps{}, fmt.Errorf("part %s: Content-Type %q, want application/json", name, ct)
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return runOps{}, fmt.Errorf("part %s: %w", name, err)
		}
		if l, ok := ctParams["length"]; ok && l != fmt.Sprint(len(data)) {
			return runOps{}, fmt.Errorf("part %s: Content-Type length=%s but %d bytes", name, l, len(data))
		}
		if cl := p.Header.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(data)) {
			return runOps{}, fmt.Errorf("part %s: Content-Length %s but %d bytes", name, cl, len(data))
		}
		segs := strings.Split(name, ".")
		if segs[0] != "post" && segs[0] != "patch" {
			return runOps{}, fmt.Errorf("part %s: unknown operation", name)
		}
		if len(segs) < 2 || !uuidRE.MatchString(segs[1]) {
			return runOps{}, fmt.Errorf("part %s: run id is not a UUID", name)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return runOps{}, fmt.Errorf("part %s: invalid JSON: %w", name, err)
		}
		key := opID{segs[0], segs[1]}
		switch len(segs) {
		case 2:
			obj, ok := v.(map[string]any)
			if !ok {
				return runOps{}, fmt.Errorf("part %s: run is not an object", name)
			}
			for k := range obj {
				if splitFields[k] {
					return runOps{}, fmt.Errorf("part %s: field %s must be its own part", name, k)
				}
			}
			if _, dup := runs[key]; dup {
				return runOps{}, fmt.Errorf("part %s: run sent twice in one request", name)
			}
			if obj["id"] != key.id {
				return runOps{}, fmt.Errorf("part %s: id %v differs from the part name", name, obj["id"])
			}
			runs[key] = obj
			order = append(order, key)
		case 3:
			if !splitFields[segs[2]] {
				return runOps{}, fmt.Errorf("part %s: unknown field part", name)
			}
			if fields[key] == nil {
				fields[key] = map[string]any{}
			}
			fields[key][segs[2]] = v
		default:
			return runOps{}, fmt.Errorf("part %s: malformed name", name)
		}
	}
	for key, fs := range fields {
		run, ok := runs[key]
		if !ok {
			return runOps{}, fmt.Errorf("field parts for run %s without its %s part", key.id, key.op)
		}
		for k, v := range fs {
			run[k] = v
		}
	}
	var out runOps
	for _, key := range order {
		if key.op == "post" {
			out.posts = append(out.posts, runs[key])
		} else {
			out.patches = append(out.patches, runs[key])
		}
	}
	return out, nil
}

func parseBatch(body []byte) (runOps, error) {
	var b struct {
		Post  []map[string]any `json:"post"`
		Patch []map[string]any `json:"patch"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return runOps{}, fmt.Errorf("batch body: %w", err)
	}
	if len(b.Post)+len(b.Patch) == 0 {
		return runOps{}, errors.New("batch body: neither post nor patch runs")
	}
	return runOps{posts: b.Post, patches: b.Patch}, nil
}
