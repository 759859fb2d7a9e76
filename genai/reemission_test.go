package genai

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestIsReemission(t *testing.T) {
	m := func(f func(pcommon.Map)) pcommon.Map { a := pcommon.NewMap(); f(a); return a }
	assert.False(t, IsReemission(m(func(pcommon.Map) {})), "a first emission")
	assert.False(t, IsReemission(m(func(a pcommon.Map) { a.PutStr(AttrMergeStatus, MergeMerged) })))
	assert.True(t, IsReemission(m(func(a pcommon.Map) { a.PutStr(AttrMergeStatus, MergeCorrected) })))
	assert.True(t, IsReemission(m(func(a pcommon.Map) { a.PutInt(AttrMergeRevision, 1764633600000) })))
	assert.False(t, IsReemission(m(func(a pcommon.Map) { a.PutInt(AttrMergeRevision, 0) })))
	assert.False(t, IsReemission(m(func(a pcommon.Map) { a.PutStr(AttrMergeRevision, "2") })), "a revision must be an int")
}
