package subagentmerge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// A fingerprint reads the same whatever order the merge's attributes come in.
func TestFingerprintIgnoresOrder(t *testing.T) {
	a, b := pcommon.NewMap(), pcommon.NewMap()
	a.PutStr(genai.AttrCaller, "subagent:coder")
	a.PutInt(genai.AttrSubagentInput, 3)
	a.PutStr("gen_ai.request.model", "gpt-4o")
	b.PutStr("gen_ai.request.model", "gpt-4o")
	b.PutInt(genai.AttrSubagentInput, 3)
	b.PutStr(genai.AttrCaller, "subagent:coder")
	assert.Equal(t, fingerprint(a), fingerprint(b))
	b.PutInt(genai.AttrSubagentInput, 4)
	assert.NotEqual(t, fingerprint(a), fingerprint(b))
}

// A fingerprint tells apart every change to what the merge wrote (values, their types,
// a list's elements and their order, an attribute more) and ignores the emitter's own
// attributes.
func TestFingerprintSeesEveryChange(t *testing.T) {
	base := func() pcommon.Map {
		m := pcommon.NewMap()
		m.PutStr(genai.AttrMergeStatus, "merged")
		m.PutInt(genai.AttrSubagentInput, 5)
		m.PutDouble(genai.AttrSubagentCostTotal, 0.25)
		ids := m.PutEmptySlice(genai.AttrSubagentToolCallIDs)
		ids.AppendEmpty().SetStr("call_a")
		ids.AppendEmpty().SetStr("call_b")
		m.PutStr("gen_ai.request.model", "gpt-4o")
		return m
	}
	want := fingerprint(base())
	assert.Equal(t, want, fingerprint(base()), "the same content hashes the same")
	assert.NotZero(t, want)
	assert.NotZero(t, fingerprint(pcommon.NewMap()), "0 means must go out again")

	changes := map[string]func(pcommon.Map){
		"int value":     func(m pcommon.Map) { m.PutInt(genai.AttrSubagentInput, 6) },
		"int as string": func(m pcommon.Map) { m.PutStr(genai.AttrSubagentInput, "5") },
		"double value":  func(m pcommon.Map) { m.PutDouble(genai.AttrSubagentCostTotal, 0.5) },
		"status":        func(m pcommon.Map) { m.PutStr(genai.AttrMergeStatus, "orphan") },
		"list element": func(m pcommon.Map) {
			v, _ := m.Get(genai.AttrSubagentToolCallIDs)
			v.Slice().At(1).SetStr("call_c")
		},
		"list order": func(m pcommon.Map) {
			v, _ := m.Get(genai.AttrSubagentToolCallIDs)
			v.Slice().At(0).SetStr("call_b")
			v.Slice().At(1).SetStr("call_a")
		},
		"list longer": func(m pcommon.Map) {
			v, _ := m.Get(genai.AttrSubagentToolCallIDs)
			v.Slice().AppendEmpty().SetStr("call_c")
		},
		"caller added": func(m pcommon.Map) { m.PutStr(genai.AttrCaller, "subagent:coder") },
		"result added": func(m pcommon.Map) { m.PutInt(genai.AttrSubagentOutput, 0) },
		"result gone":  func(m pcommon.Map) { m.Remove(genai.AttrSubagentInput) },
	}
	for name, change := range changes {
		m := base()
		change(m)
		assert.NotEqual(t, want, fingerprint(m), name)
	}
	m := base()
	m.PutStr("gen_ai.request.model", "gpt-4.1") // the emitter's own: not the merge's
	assert.Equal(t, want, fingerprint(m))
}
