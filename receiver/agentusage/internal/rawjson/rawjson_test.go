package rawjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkCheck checks b with the checking walk as a decoder drives it: every object
// and array walked member by member, scalars checked with Value.
func walkCheck(b []byte) error {
	w := NewWalk(b)
	var walk func(at int) (int, error)
	walk = func(at int) (int, error) {
		switch b[at] {
		case '{':
			return w.Members(at, func(_ []byte, at int) (int, error) { return walk(at) })
		case '[':
			return w.Elements(at, walk)
		}
		return w.Value(at)
	}
	i := skipWS(b, 0)
	if i >= len(b) {
		return Validate(b)
	}
	end, err := walk(i)
	if err != nil {
		return err
	}
	return w.End(end)
}

// decodeStd is what the faces decoded with before: encoding/json into interface values,
// numbers kept as json.Number.
func decodeStd(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.InputOffset() != int64(len(bytes.TrimRight(b, " \t\r\n"))) {
		return nil, false
	}
	return v, true
}

// walk decodes v through Fields, Elems and String, as a face reads a document.
func walk(d *Doc, v []byte) any {
	switch {
	case IsObject(v):
		m := map[string]any{}
		d.Fields(v, func(k, val []byte) bool {
			m[string(k)] = walk(d, val)
			return true
		})
		return m
	case IsArray(v):
		out := []any{}
		d.Elems(v, func(val []byte) bool {
			out = append(out, walk(d, val))
			return true
		})
		return out
	case IsString(v):
		s, ok := String(v)
		if !ok {
			panic("a parsed string does not decode")
		}
		return s
	}
	return Value(v)
}

// agree checks that Parse accepts exactly what encoding/json accepts and that Value
// decodes what it accepted to the same value.
func agree(t *testing.T, b []byte) {
	t.Helper()
	d, ok := Parse(b)
	assert.Equal(t, json.Valid(b), ok, "%q", b)
	err := Validate(b)
	werr := walkCheck(b)
	assert.Equal(t, err, werr, "%q: the checking walk reads the grammar as Validate does", b)
	if !ok {
		var se *SyntaxError
		require.ErrorAs(t, err, &se, "%q: Validate refuses what Parse refuses, saying where", b)
		assert.True(t, se.Offset >= 0 && se.Offset <= len(b), "%q: offset %d inside the document", b, se.Offset)
		return
	}
	require.NoError(t, err, "%q", b)
	want, wok := decodeStd(b)
	require.True(t, wok, "%q", b)
	assert.Equal(t, want, Value(d.Root()), "%q", b)
	assert.Equal(t, want, walk(d, d.Root()), "%q: walking the document reads the same", b)
	assert.Equal(t, want, walk(nil, d.Root()), "%q: walking without the index reads the same", b)
}

var cases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-12.25E-3`, `1e400`, `123456789012345678901234567890`,
	`true`, `false`, `null`, ` {"a" : [1, "x", null, true, {"b": {}}] } `,
	`{"a":1,"a":2}`, `{"k\u00e9y":"v\n\"q\"\\\/"}`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\xfe\"", "{\"\xff\":1}",
	"\"caf\xc3\xa9\"",
	// refused
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`,
	`truex`, `"a`, "\"\x01\"", `"\x"`, `"\u12"`, `"\u12g4"`, `[1 2]`, `{"a":1}x`, `{} {}`, `NaN`, `[-]`,
	"\ufeff{}",
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range cases {
		agree(t, []byte(c))
	}
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	agree(t, []byte(deep))
	agree(t, []byte("["+deep+"]"))
}

// Validate names the byte where a document stops being JSON and what was expected there.
func TestValidateNamesTheByte(t *testing.T) {
	for _, c := range []struct {
		doc string
		at  int
		msg string
	}{
		{``, 0, "unexpected end of input"},
		{`  `, 2, "unexpected end of input"},
		{`{"post":[{"id":1 2}]}`, 17, "expected , or } after an object member"},
		{`[1 2]`, 3, "expected , or ] after an array element"},
		{`{"a":1,}`, 7, "expected a string key"},
		{`{a:1}`, 1, "expected a string key"},
		{`{"a" 1}`, 5, "expected : after an object key"},
		{`{"a"`, 4, "expected : after an object key"},
		{`{"post":`, 8, "unexpected end of input"},
		{`[1,`, 3, "unexpected end of input"},
		{`["ok", "a` + "\x01" + `"]`, 7, "invalid string"},
		{`{"k\x":1}`, 1, "invalid string"},
		{`[tru]`, 1, "invalid literal"},
		{`[01]`, 2, "expected , or ] after an array element"},
		{`[-]`, 1, "invalid value"},
		{`{"a":1} x`, 8, "data after the JSON value"},
		{strings.Repeat("[", MaxDepth+1), MaxDepth, "nested deeper than 10000 levels"},
	} {
		err := Validate([]byte(c.doc))
		var se *SyntaxError
		require.ErrorAs(t, err, &se, "%q", c.doc)
		assert.Equal(t, SyntaxError{Offset: c.at, Msg: c.msg}, *se, "%q", c.doc)
		assert.Equal(t, "invalid JSON at byte "+strconv.Itoa(c.at)+": "+c.msg, err.Error())
	}
}

// specialIn finds every byte that is not plain, at every position of a word, and
// raises no false alarm on a word of plain bytes around it.
func TestSpecialInExhaustiveBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			for _, fill := range []byte{'a', ' ', '~', '0', 0x80, 0xff} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				x := binary.LittleEndian.Uint64(b[:])
				if !plainByte[c] && !specialIn(x) {
					t.Fatalf("byte %#x at %d missed", c, pos)
				}
				if plainByte[c] && specialIn(x) {
					t.Errorf("false alarm %#x at %d fill %#x", c, pos, fill)
				}
			}
		}
	}
}

// A deep document is read once: Value and Parse stay linear in its size.
func TestDeepDocumentIsLinear(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	doc := []byte(strings.Repeat("[", MaxDepth) + `"` + big + `"` + strings.Repeat("]", MaxDepth))
	start := time.Now()
	d, ok := Parse(doc)
	require.True(t, ok)
	out := Value(d.Root())
	for range MaxDepth {
		arr, ok := out.([]any)
		require.True(t, ok)
		require.Len(t, arr, 1)
		out = arr[0]
	}
	assert.Equal(t, big, out)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestWalk(t *testing.T) {
	d, ok := Parse([]byte(` {"a": [1, {"x":"y"}, "s"], "b\u0021": "c\u0021", "a": 7} `))
	require.True(t, ok)
	v := d.Root()
	var keys []string
	d.Fields(v, func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
	assert.Equal(t, []string{"a", "b!", "a"}, keys)
	a, ok := d.Get(v, "a")
	assert.True(t, ok)
	assert.Equal(t, "7", string(a), "the last of duplicate keys wins")
	b, _ := d.Get(v, "b!")
	s, ok := String(b)
	assert.True(t, ok)
	assert.Equal(t, "c!", s)
	_, ok = d.Get(v, "zz")
	assert.False(t, ok)
	d2, _ := Parse([]byte(`[1, {"x":"y"}, "s", []]`))
	var elems []string
	d2.Elems(d2.Root(), func(e []byte) bool { elems = append(elems, string(e)); return true })
	assert.Equal(t, []string{"1", `{"x":"y"}`, `"s"`, "[]"}, elems)
	// a slice that is not part of the document is walked without the index
	var other []string
	d2.Elems([]byte(`[{"a":[1]}, 2]`), func(e []byte) bool { other = append(other, string(e)); return true })
	assert.Equal(t, []string{`{"a":[1]}`, "2"}, other)
	// a part of the document cut inside a container never reads past its end
	whole := d2.Root()
	cut := whole[:6] // `[1, {"`
	assert.NotPanics(t, func() { d2.Elems(cut, func([]byte) bool { return true }) })
	assert.Equal(t, `{"a": 1}`, string(TrimSpace([]byte(" \r\n\t{\"a\": 1}\n "))))
	assert.Empty(t, TrimSpace([]byte(" \n")))
	assert.True(t, IsNull(nil))
	assert.True(t, IsNull([]byte("null")))
	_, ok = String([]byte("12"))
	assert.False(t, ok)
}

// FuzzParseAgreesWithEncodingJSON: on any input Parse and encoding/json accept the same
// documents and decode them to the same values.
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { agree(t, b) })
}

// countsCases are documents Counts is asked about: flat objects of counts and what is
// not one.
var countsCases = []string{
	`{}`, ` { } `, `{"input":70,"input_cached_tokens":30,"output":15,"total":120}`, ` { "a" : 1 , "b":2 } `,
	`{"a":0}`, `{"a":-0}`, `{"a":-1}`, `{"a":01}`, `{"a":1.0}`, `{"a":1e2}`, `{"a":9223372036854775807}`,
	`{"a":9223372036854775808}`, `{"a":99999999999999999999}`, `{"a":"1"}`, `{"a":null}`, `{"a":{}}`,
	`{"a":[1]}`, `{"a":true}`, `{"a":1,"a":2}`, `{"in\u0070ut":3}`, `{"a\"b":1}`, `{"a":1,}`, `{"a":1}x`,
	`{"a":1} {}`, `{"a" 1}`, `{a:1}`, `{"a":1`, `{"a":`, `{"a"`, `{`, ``, `[]`, `1`, "{\"\xff\":1}",
	`{"a":0A0}`,
}

// countsAgree checks Counts against encoding/json: Counts reads exactly the documents
// that decode into a map of int64 whose every value is a non-negative integer literal,
// with the same keys and counts in document order.
func countsAgree(t *testing.T, b []byte) {
	t.Helper()
	type kv struct {
		k string
		n int64
	}
	var got []kv
	ok := Counts(b, func(key []byte, n int64) bool {
		got = append(got, kv{string(key), n})
		return true
	})
	var m map[string]int64
	wantOK := json.Unmarshal(b, &m) == nil && m != nil
	if wantOK { // encoding/json reads 1.0 or -1 into an int64 as well: a count is neither
		d, _ := Parse(b)
		d.Fields(d.Root(), func(_, v []byte) bool {
			wantOK = wantOK && isDigit(v[0]) && !bytes.ContainsAny(v, ".eE")
			return true
		})
	}
	require.Equal(t, wantOK, ok, "%q", b)
	if !ok {
		return
	}
	want := map[string]int64{}
	for _, e := range got {
		want[e.k] = e.n // the last of duplicate keys wins, as in m
	}
	assert.Equal(t, m, want, "%q", b)
}

func TestCountsAgreeWithEncodingJSON(t *testing.T) {
	for _, c := range countsCases {
		countsAgree(t, []byte(c))
	}
	stopped := 0
	assert.False(t, Counts([]byte(`{"a":1,"b":2}`), func([]byte, int64) bool { stopped++; return false }), "fn stops it")
	assert.Equal(t, 1, stopped)
}

// FuzzCountsAgreeWithEncodingJSON: on any input Counts reads the flat objects of counts
// encoding/json reads, with the same counts, and refuses the rest.
func FuzzCountsAgreeWithEncodingJSON(f *testing.F) {
	for _, c := range countsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { countsAgree(t, b) })
}
