package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsReemission(t *testing.T) {
	cases := []struct {
		name string
		set  func(m pcommon.Map)
		rev  int64
		want bool
	}{
		{"first emission", func(pcommon.Map) {}, 0, false},
		{"merged, no revision", func(m pcommon.Map) { m.PutStr(AttrMergeStatus, MergeMerged) }, 0, false},
		{"corrected without revision", func(m pcommon.Map) { m.PutStr(AttrMergeStatus, MergeCorrected) }, 0, true},
		{"corrected with revision", func(m pcommon.Map) {
			m.PutStr(AttrMergeStatus, MergeCorrected)
			m.PutInt(AttrMergeRevision, 3)
		}, 3, true},
		{"merged tool span with revision", func(m pcommon.Map) {
			m.PutStr(AttrMergeStatus, MergeMerged)
			m.PutInt(AttrMergeRevision, 1)
		}, 1, true},
		{"orphan tool span with revision", func(m pcommon.Map) {
			m.PutStr(AttrMergeStatus, MergeOrphan)
			m.PutInt(AttrMergeRevision, 2)
		}, 2, true},
		{"revision 0 is none", func(m pcommon.Map) { m.PutInt(AttrMergeRevision, 0) }, 0, false},
		{"negative revision is none", func(m pcommon.Map) { m.PutInt(AttrMergeRevision, -4) }, 0, false},
		{"string revision is none", func(m pcommon.Map) { m.PutStr(AttrMergeRevision, "2") }, 0, false},
		{"double revision", func(m pcommon.Map) { m.PutDouble(AttrMergeRevision, 2) }, 2, true},
		{"status corrected as int is not corrected", func(m pcommon.Map) { m.PutInt(AttrMergeStatus, 1) }, 0, false},
	}
	for _, c := range cases {
		m := pcommon.NewMap()
		c.set(m)
		assert.Equal(t, c.want, IsReemission(m), c.name)
		assert.Equal(t, c.rev, MergeRevision(m), c.name)
	}
}

func TestIsCountedVersion(t *testing.T) {
	m := pcommon.NewMap()
	assert.True(t, IsCountedVersion(m), "a first emission")
	m.PutBool(AttrCallerPending, true)
	assert.False(t, IsCountedVersion(m), "a first emission whose caller is pending")
	s := pcommon.NewMap()
	s.PutInt(AttrMergeRevision, 7)
	assert.False(t, IsCountedVersion(s), "a re-emission")
	s.PutBool(AttrCallerSettled, true)
	assert.True(t, IsCountedVersion(s), "the re-emission that settles the caller")
}
