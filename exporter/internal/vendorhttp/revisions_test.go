package vendorhttp

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

func key(n byte) SpanKey { return SpanKey{Trace: pcommon.TraceID{1}, Span: pcommon.SpanID{n}} }

func TestVersionOf(t *testing.T) {
	m := pcommon.NewMap()
	assert.Equal(t, int64(0), VersionOf(key(1), m).Rev)
	m.PutStr(genai.AttrMergeStatus, genai.MergeCorrected)
	assert.Equal(t, int64(1), VersionOf(key(1), m).Rev, "corrected without a revision is a re-emission")
	m.PutInt(genai.AttrMergeRevision, 4)
	assert.Equal(t, Version{key(1), 4}, VersionOf(key(1), m))
}

func TestRevisionsKeep(t *testing.T) {
	r := NewRevisions(10)
	// nothing re-emitted anywhere: no work, everything goes
	assert.Nil(t, r.Keep([]Version{{key(1), 0}, {key(2), 0}}, false))

	// revision 2 arrives first: sent
	assert.Nil(t, r.Keep([]Version{{key(1), 2}}, false))
	// then revision 1 and the first emission: neither may replace revision 2 at Langfuse
	assert.Equal(t, []bool{false, false, true}, r.Keep([]Version{{key(1), 1}, {key(1), 0}, {key(2), 0}}, false))
	// LangSmith keeps the first emission (its post creates the run), never the old patch
	assert.Equal(t, []bool{false, true}, r.Keep([]Version{{key(1), 1}, {key(1), 0}}, true))
	// the same revision again (a retry) goes out again
	assert.Nil(t, r.Keep([]Version{{key(1), 2}}, false))
	// a newer one goes out and becomes the bar
	assert.Nil(t, r.Keep([]Version{{key(1), 3}}, false))
	assert.Equal(t, []bool{false}, r.Keep([]Version{{key(1), 2}}, false))

	// within one batch only the newest version of a span goes out, in any order
	assert.Equal(t, []bool{false, true, false, false}, r.Keep([]Version{{key(5), 1}, {key(5), 3}, {key(5), 2}, {key(5), 0}}, false))
	assert.Equal(t, []bool{false, true, false, true}, r.Keep([]Version{{key(6), 1}, {key(6), 3}, {key(6), 2}, {key(6), 0}}, true))
	assert.Equal(t, []bool{false, true}, r.Keep([]Version{{key(7), 2}, {key(7), 2}}, false), "the last of equal ones")
}

func TestRevisionsForgetTheOldestPastTheBound(t *testing.T) {
	r := NewRevisions(3)
	for i := byte(1); i <= 5; i++ {
		r.Keep([]Version{{key(i), 2}}, false)
	}
	assert.Equal(t, 3, r.Len())
	// 1 and 2 were forgotten: their old versions pass; 3..5 are still guarded
	assert.Nil(t, r.Keep([]Version{{key(1), 1}}, false))
	assert.Equal(t, []bool{false}, r.Keep([]Version{{key(5), 1}}, false))
	assert.Equal(t, 3, r.Len())
}

func TestRevisionsConcurrent(t *testing.T) {
	r := NewRevisions(0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.Keep([]Version{{key(byte(i)), int64(g + 1)}, {key(byte(i)), 0}}, g%2 == 0)
			}
		}()
	}
	wg.Wait()
	// whatever the interleaving, the highest revision is the bar for every span
	for i := range 200 {
		assert.Equal(t, []bool{false}, r.Keep([]Version{{key(byte(i)), 7}}, false))
	}
}
