package langsmith

import (
	"bytes"
	"io"
	"sort"
)

// The scanning decoder for /runs/multipart: the whole body is read once and split on
// the boundary by hand (no per-part readers, header maps or copies), and each run's
// parts are scanned like /runs/batch items. It handles the layout the LangSmith SDKs
// send (CRLF lines, a Content-Disposition form-data name, JSON parts); for anything
// else it reports !ok and DecodeMultipart runs mime/multipart over the same bytes.

// mpPart is one part: its form name and content.
type mpPart struct {
	name []byte
	data []byte
}

// splitMultipart splits body into parts, appended to parts. ok is false for any layout this splitter
// does not handle exactly as mime/multipart would.
func splitMultipart(parts []mpPart, body []byte, boundary string) ([]mpPart, bool) {
	dash := "--" + boundary
	delim := []byte("\r\n" + dash)
	if !bytes.HasPrefix(body, []byte(dash+"\r\n")) {
		return nil, false
	}
	if parts == nil {
		parts = make([]mpPart, 0, 64)
	}
	i := len(dash) + 2
	for {
		// headers, up to an empty line
		var name []byte
		sawCD := false
		hend := bytes.Index(body[i:], []byte("\r\n\r\n"))
		if bytes.HasPrefix(body[i:], []byte("\r\n")) {
			hend = -2 // no headers
		} else if hend < 0 {
			return nil, false
		}
		block := body[i : i+hend+2] // header lines, each ending in CRLF
		i += hend + 4
		for nh := 0; len(block) > 0; nh++ {
			eol := bytes.IndexByte(block, '\n')
			if eol < 1 || block[eol-1] != '\r' || nh > 64 {
				return nil, false
			}
			line := block[:eol-1]
			block = block[eol+1:]
			key, val, ok := headerLine(line)
			if !ok {
				return nil, false
			}
			switch {
			case bytes.EqualFold(key, []byte("Content-Disposition")):
				if sawCD {
					return nil, false
				}
				sawCD = true
				if name, ok = formName(val); !ok {
					return nil, false
				}
			case bytes.EqualFold(key, []byte("Content-Transfer-Encoding")):
				return nil, false // mime/multipart may decode the content
			}
		}
		if bytes.HasPrefix(body[i:], []byte(dash)) {
			return nil, false // mime/multipart reads an empty part ended by a bare boundary
		}
		end := bytes.Index(body[i:], delim)
		if end < 0 {
			return nil, false
		}
		parts = append(parts, mpPart{name: name, data: body[i : i+end]})
		i += end + len(delim)
		rest := body[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("\r\n")):
			i += 2
		case bytes.HasPrefix(rest, []byte("--")):
			rest = rest[2:]
			if len(rest) == 0 || bytes.HasPrefix(rest, []byte("\r\n")) {
				return parts, true // the epilogue, if any, is ignored
			}
			return nil, false
		default:
			return nil, false
		}
	}
}

// headerLine splits "Key: value" (value trimmed as net/textproto trims it).
func headerLine(line []byte) ([]byte, []byte, bool) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, false
	}
	for _, c := range line[:colon] {
		if !(c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')) {
			return nil, nil, false
		}
	}
	for _, c := range line[colon+1:] {
		if (c < 0x20 && c != '\t') || c >= 0x7f {
			return nil, nil, false
		}
	}
	return line[:colon], bytes.Trim(line[colon+1:], " \t"), true
}

// formName reads `form-data; name="..."`, the one shape the SDKs send; other shapes
// are left to mime.ParseMediaType.
func formName(v []byte) ([]byte, bool) {
	const pre = `form-data; name="`
	if !bytes.HasPrefix(v, []byte(pre)) || !bytes.HasSuffix(v, []byte(`"`)) || len(v) < len(pre)+1 {
		return nil, false
	}
	name := v[len(pre) : len(v)-1]
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return name, true
}

// readAll is io.ReadAll into buf (reused when it is big enough), sized for the
// expected length.
func readAll(buf []byte, r io.Reader, sizeHint int64) ([]byte, error) {
	if sizeHint <= 0 || sizeHint > maxSizeHint {
		sizeHint = 512
	}
	b := buf[:0]
	if int64(cap(b)) < sizeHint+1 {
		b = make([]byte, 0, sizeHint+1) // +1: EOF is seen without growing
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// maxSizeHint bounds the buffer a Content-Length may make us allocate up front.
const maxSizeHint = 64 << 20

// trimJSON strips the space encoding/json allows around a value.
func trimJSON(b []byte) []byte {
	i := skipWS(b, 0)
	j := len(b)
	for j > i {
		switch b[j-1] {
		case ' ', '\t', '\n', '\r':
			j--
			continue
		}
		break
	}
	return b[i:j]
}

// decodeMultipartScan turns the parts into ops exactly as the mime/multipart path
// does, or reports !ok.
func decodeMultipartScan(parts []mpPart) ([]Op, bool) {
	type key struct{ kind, id string }
	type acc struct {
		run                             Run
		idSeen, main                    bool
		inputs, outputs, extra          []byte
		errv                            []byte
		hasIn, hasOut, hasExtra, hasErr bool
	}
	// runs in first-seen order; a run's parts usually come together, so the last run
	// is checked before the map
	accs := make([]acc, 0, len(parts)/3+1)
	keys := make([]key, 0, len(parts)/3+1)
	index := make(map[key]int, len(parts)/3+1)
	last := -1
	for _, p := range parts {
		kindB, rest, _ := bytes.Cut(p.name, []byte("."))
		var kind string
		switch string(kindB) {
		case "post":
			kind = "post"
		case "patch":
			kind = "patch"
		default:
			continue
		}
		idB, fieldB, _ := bytes.Cut(rest, []byte("."))
		if len(idB) == 0 {
			return nil, false
		}
		field := fieldB
		if last < 0 || keys[last].kind != kind || keys[last].id != string(idB) {
			k := key{kind, string(idB)}
			n, seen := index[k]
			if !seen {
				n = len(accs)
				accs = append(accs, acc{})
				keys = append(keys, k)
				index[k] = n
			}
			last = n
		}
		a := &accs[last]
		switch string(field) {
		case "":
			if a.main {
				return nil, false
			}
			a.main = true
			var ok bool
			if a.run, a.idSeen, ok = scanRun(p.data, kind == "patch"); !ok {
				return nil, false
			}
			continue
		case "inputs":
			a.inputs, a.hasIn = p.data, true // kept raw, not validated (see Run.RawInputs)
			continue
		case "outputs", "extra", "error":
		default:
			continue // events, serialized, unknown split fields: not used, not decoded
		}
		v := trimJSON(p.data)
		end, ok := scanValue(v, 0, 0)
		if !ok || end != len(v) {
			return nil, false
		}
		switch string(field) {
		case "outputs":
			a.outputs, a.hasOut = v, true
		case "extra":
			a.extra, a.hasExtra = v, true
		case "error":
			a.errv, a.hasErr = v, true
		}
	}
	ops := make([]Op, 0, len(accs))
	for n, k := range keys {
		a := &accs[n]
		r := &a.run
		sr := runScanner{r: r}
		if !a.main {
			r.Posted = k.kind == "post"
		}
		if !a.idSeen {
			r.ID = k.id
		}
		// a split part wins over the same field in the run's own part
		if a.hasIn {
			r.Inputs, r.RawInputs = nil, a.inputs
		}
		if a.hasOut && !sr.field([]byte("outputs"), a.outputs) {
			return nil, false
		}
		if a.hasExtra && !sr.field([]byte("extra"), a.extra) {
			return nil, false
		}
		if a.hasErr && !sr.field([]byte("error"), a.errv) {
			return nil, false
		}
		if !validRun(r) {
			return nil, false
		}
		ops = append(ops, Op{Patch: k.kind == "patch", Run: *r, Field: k.kind + "." + k.id})
	}
	// posts before patches, each in dotted order, so parents are seen first
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Patch != ops[j].Patch {
			return !ops[i].Patch
		}
		return false
	})
	return ops, true
}

// errReader replays a read error after the bytes read before it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var _ io.Reader = errReader{}
