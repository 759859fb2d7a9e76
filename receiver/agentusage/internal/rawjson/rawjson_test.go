package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// agree checks that Parse accepts exactly what encoding/json accepts and that Value
// decodes what it accepted to the same value.
func agree(t *testing.T, b []byte) {
	t.Helper()
	v, ok := Parse(b)
	assert.Equal(t, json.Valid(b), ok, "%q", b)
	if !ok {
		return
	}
	want, wok := decodeStd(b)
	require.True(t, wok, "%q", b)
	assert.Equal(t, want, Value(v), "%q", b)
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

// A deep document is read once: Value and Parse stay linear in its size.
func TestDeepDocumentIsLinear(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	doc := []byte(strings.Repeat("[", MaxDepth) + `"` + big + `"` + strings.Repeat("]", MaxDepth))
	start := time.Now()
	v, ok := Parse(doc)
	require.True(t, ok)
	out := Value(v)
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
	v, ok := Parse([]byte(` {"a": [1, {"x":"y"}, "s"], "b\u0021": "c\u0021", "a": 7} `))
	require.True(t, ok)
	var keys []string
	Fields(v, func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
	assert.Equal(t, []string{"a", "b!", "a"}, keys)
	a, ok := Get(v, "a")
	assert.True(t, ok)
	assert.Equal(t, "7", string(a), "the last of duplicate keys wins")
	b, _ := Get(v, "b!")
	s, ok := String(b)
	assert.True(t, ok)
	assert.Equal(t, "c!", s)
	_, ok = Get(v, "zz")
	assert.False(t, ok)
	first, _ := Parse([]byte(`[1, {"x":"y"}, "s", []]`))
	var elems []string
	Elems(first, func(e []byte) bool { elems = append(elems, string(e)); return true })
	assert.Equal(t, []string{"1", `{"x":"y"}`, `"s"`, "[]"}, elems)
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
