package langsmith

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"sort"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/rawjson"
)

// /runs/multipart: the whole body is read once and split on the boundary by hand (no
// per-part readers, header maps or copies), and each run's parts are decoded with the
// same decoder as /runs/batch items. The splitter handles the layout the LangSmith SDKs
// send (CRLF lines, a Content-Disposition form-data name, JSON parts); for anything
// else it reports !ok and mime/multipart splits the same bytes.

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
		if !headerKeyByte[c] {
			return nil, nil, false
		}
	}
	for _, c := range line[colon+1:] {
		if !headerValueByte[c] {
			return nil, nil, false
		}
	}
	return line[:colon], bytes.Trim(line[colon+1:], " \t"), true
}

// headerKeyByte and headerValueByte are the bytes a header key and value may hold
// for the splitter: letters, digits and '-'; printable ASCII and tab.
var headerKeyByte, headerValueByte = func() (k, v [256]bool) {
	for c := 0; c < 256; c++ {
		k[c] = c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		v[c] = (c >= 0x20 || c == '\t') && c < 0x7f
	}
	return k, v
}()

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

// mimeParts splits body with mime/multipart: the general path, for layouts
// splitMultipart leaves (a preamble, LF line ends, other Content-Disposition shapes,
// encoded parts). Parts that are not post.* or patch.* are not kept.
func mimeParts(parts []mpPart, body []byte, boundary string) ([]mpPart, error) {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: malformed multipart body: %v", ErrBody, err)
		}
		name := p.FormName()
		if kind, _, _ := strings.Cut(name, "."); kind != "post" && kind != "patch" {
			continue
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("%w: malformed multipart body: part %q: %v", ErrBody, name, err)
		}
		parts = append(parts, mpPart{name: []byte(name), data: data})
	}
}

// splitField is a run field a multipart part may carry alone (post.<id>.<field>); it
// wins over the same field in the run's own part, whatever their order. events and
// serialized are not read, so their parts are not decoded at all.
type splitField struct {
	val []byte
	has bool
}

// partAcc is what decodeParts gathers for one run across its parts; the run itself
// is decoded in place in the ops (same index).
type partAcc struct {
	kind, id string
	idSeen   bool
	errs     []keyErr // of the run's fields, kept across its parts
	inputs   splitField
	split    [3]splitField // outputs, extra, error
	bad      string
}

var splitKeys = [3]runKey{keyOutputs, keyExtra, keyError}

// partState is decodeParts' scratch memory, recycled across requests.
type partState struct {
	accs  []partAcc
	index [2]map[string]int // post, patch: run id → index
}

var partStates = sync.Pool{New: func() any { return new(partState) }}

func (st *partState) release() {
	if cap(st.accs) > maxPooledParts {
		return
	}
	clear(st.accs[:cap(st.accs)])
	st.accs = st.accs[:0]
	for _, m := range st.index {
		clear(m)
	}
	partStates.Put(st)
}

// decodeParts turns the parts of a multipart body into ops: each run from its own
// part and its field parts, read with the batch decoder. A run with a part
// that is not JSON, or with a bad field, is reported (naming the part or the field:
// "post.<id>.outputs: ...") and skipped.
func decodeParts(parts []mpPart) ([]Op, []ItemError) {
	st := partStates.Get().(*partState)
	defer st.release()
	accs, index := st.accs[:0], &st.index
	ops := newOps(len(parts)/3 + 1)
	var lastStr [numKeys]string
	// a run's parts usually come together, so the last run is checked before the map
	last := -1
	for _, p := range parts {
		kindB, rest, _ := bytes.Cut(p.name, []byte("."))
		var kind string
		g := 0
		switch string(kindB) {
		case "post":
			kind = "post"
		case "patch":
			kind, g = "patch", 1
		default:
			continue
		}
		idB, field, _ := bytes.Cut(rest, []byte("."))
		if last < 0 || accs[last].kind != kind || accs[last].id != string(idB) {
			n, seen := index[g][string(idB)]
			if !seen {
				if index[g] == nil {
					index[g] = make(map[string]int, len(parts)/3+1)
				}
				n = len(accs)
				id := string(idB)
				accs = append(accs, partAcc{kind: kind, id: id})
				ops = append(ops, Op{Patch: g == 1})
				index[g][id] = n
			}
			last = n
		}
		a := &accs[last]
		if a.bad != "" {
			continue
		}
		if len(idB) == 0 {
			a.bad = fmt.Sprintf("part %q: missing run id", p.name)
			continue
		}
		var slot *splitField
		switch string(field) {
		case "":
			d := runDecoder{r: &ops[last].Run, errs: a.errs, last: &lastStr}
			if err := d.doc(p.data); err != nil {
				a.bad = fmt.Sprintf("%s: %v", p.name, err)
			}
			// field errors are told once the run is complete: a field part may
			// replace the bad value
			a.idSeen, a.errs = a.idSeen || d.idSeen, d.errs
			continue
		case "inputs":
			a.inputs = splitField{p.data, true} // checked only when read (see Run.inputs)
			continue
		case "outputs":
			slot = &a.split[0]
		case "extra":
			slot = &a.split[1]
		case "error":
			slot = &a.split[2]
		default:
			continue // events, serialized, unknown split fields: not used, not decoded
		}
		v := rawjson.TrimSpace(p.data)
		if err := rawjson.Validate(v); err != nil {
			a.bad = fmt.Sprintf("%s: %v", p.name, err)
			continue
		}
		*slot = splitField{v, true}
	}
	var errs []ItemError
	n := 0
	for i := range accs {
		a := &accs[i]
		d := runDecoder{r: &ops[i].Run, idSeen: a.idSeen, errs: a.errs}
		if a.bad == "" {
			if !a.idSeen {
				d.r.ID = a.id
			}
			if a.inputs.has {
				d.r.inputs = a.inputs.val
			}
			for j, f := range a.split {
				if f.has {
					d.set(splitKeys[j], f.val)
				}
			}
			if !d.finish(a.kind == "patch") {
				a.bad = d.err(a.kind + "." + a.id).Error()
			}
		}
		if a.bad != "" {
			errs = append(errs, ItemError{Field: a.kind + "." + a.id, Message: a.bad})
			continue
		}
		ops[n] = ops[i]
		n++
	}
	clear(ops[n:])
	ops = ops[:n]
	st.accs = accs
	// posts before patches, each in the order sent, so parents are seen first
	sort.SliceStable(ops, func(i, j int) bool { return !ops[i].Patch && ops[j].Patch })
	return ops, errs
}
