package merge

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentmeter/agentmeter/genai"
)

// Outcomes that write the same attributes hash the same, whatever their Dispatch's
// address; changing any one thing an outcome writes changes its hash.
func TestOutcomeHashCoversWhatItWrites(t *testing.T) {
	base := func() Outcome {
		return Outcome{Status: genai.MergeMerged, Caller: "lead_agent", Dispatch: &Dispatch{
			Usage:    genai.Usage{Input: 1, Output: 2, CacheRead: 3, CacheCreation: 4, Reasoning: 5},
			Cost:     genai.Cost{Input: 0.1, CacheRead: 0.2, CacheCreation: 0.3, Output: 0.4, Reasoning: 0.5, Total: 1.5},
			Priced:   true,
			Unpriced: 6,
			IDs:      []string{"call_a", "call_b"},
		}}
	}
	b := base()
	h := b.Hash()
	for _, path := range leafPaths(reflect.TypeFor[Outcome](), nil) {
		o := base()
		changeLeaf(reflect.ValueOf(&o).Elem(), path)
		assert.NotEqual(t, h, o.Hash(), "field %v: a field Hash does not read", path)
	}
	other := base()
	assert.Equal(t, h, other.Hash(), "same content, another Dispatch")
	assert.NotZero(t, (&Outcome{}).Hash())

	changes := map[string]func(o *Outcome){
		"status":         func(o *Outcome) { o.Status = genai.MergeOrphan },
		"caller":         func(o *Outcome) { o.Caller = "researcher" },
		"caller/status":  func(o *Outcome) { o.Status, o.Caller = genai.MergeMerged+"lead_agent", "" },
		"no dispatch":    func(o *Outcome) { o.Dispatch = nil },
		"input":          func(o *Outcome) { o.Dispatch.Usage.Input++ },
		"output":         func(o *Outcome) { o.Dispatch.Usage.Output++ },
		"cache read":     func(o *Outcome) { o.Dispatch.Usage.CacheRead++ },
		"cache creation": func(o *Outcome) { o.Dispatch.Usage.CacheCreation++ },
		"reasoning":      func(o *Outcome) { o.Dispatch.Usage.Reasoning++ },
		"unpriced":       func(o *Outcome) { o.Dispatch.Unpriced++ },
		"cost input":     func(o *Outcome) { o.Dispatch.Cost.Input += 0.01 },
		"cost cached":    func(o *Outcome) { o.Dispatch.Cost.CacheRead += 0.01 },
		"cost creation":  func(o *Outcome) { o.Dispatch.Cost.CacheCreation += 0.01 },
		"cost output":    func(o *Outcome) { o.Dispatch.Cost.Output += 0.01 },
		"cost reasoning": func(o *Outcome) { o.Dispatch.Cost.Reasoning += 0.01 },
		"cost total":     func(o *Outcome) { o.Dispatch.Cost.Total += 0.01 },
		"priced":         func(o *Outcome) { o.Dispatch.Priced = false },
		"one id less":    func(o *Outcome) { o.Dispatch.IDs = o.Dispatch.IDs[:1] },
		"ids joined":     func(o *Outcome) { o.Dispatch.IDs = []string{"call_acall_b"} },
		"ids in order":   func(o *Outcome) { o.Dispatch.IDs = []string{"call_b", "call_a"} },
		// ids and callers are the emitter's strings: a 0 byte in one must not move a
		// boundary (found by review)
		"nul in an id":  func(o *Outcome) { o.Dispatch.IDs = []string{"call_a\x00call_b"} },
		"nul in caller": func(o *Outcome) { o.Caller = "lead_agent\x00" },
	}
	seen := map[uint64]string{h: "base"}
	for name, change := range changes {
		o := base()
		change(&o)
		got := o.Hash()
		assert.NotEqual(t, h, got, name)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s hashes as %s", name, prev)
		}
		seen[got] = name
	}
}

// Two outcomes whose ids hold a 0 byte at different places write different attributes,
// so they hash apart (a hash that ended each string with a 0 byte took them as one).
func TestOutcomeHashKeepsStringBoundaries(t *testing.T) {
	a := Outcome{Dispatch: &Dispatch{Usage: genai.Usage{Input: 1}, IDs: []string{"a\x00b", "c"}}}
	b := Outcome{Dispatch: &Dispatch{Usage: genai.Usage{Input: 1}, IDs: []string{"a", "b\x00c"}}}
	assert.NotEqual(t, a.Hash(), b.Hash())
	c := Outcome{Status: "x\x00", Caller: "y"}
	d := Outcome{Status: "x", Caller: "\x00y"}
	assert.NotEqual(t, c.Hash(), d.Hash())
}

// leafPaths are the field index paths of every value typ holds (through pointers and
// structs), so that a field added to Outcome, Dispatch, genai.Usage or genai.Cost is
// changed above without a line written for it.
func leafPaths(typ reflect.Type, at []int) [][]int {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return [][]int{at}
	}
	var out [][]int
	for i := range typ.NumField() {
		out = append(out, leafPaths(typ.Field(i).Type, append(append([]int(nil), at...), i))...)
	}
	return out
}

// changeLeaf changes the value at path in v (a struct), whatever its kind.
func changeLeaf(v reflect.Value, path []int) {
	for _, i := range path {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		v = v.Field(i)
	}
	switch v.Kind() {
	case reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.25)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	default:
		panic(fmt.Sprintf("changeLeaf: a %s field: teach it, and Hash", v.Kind()))
	}
}
