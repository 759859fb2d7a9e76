package tokenmetrics

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// The connector reads the counting rule in its one pass over a span's attributes; over
// random combinations of the version attributes it counts exactly the versions
// genai.IsCountedVersion says are counted, and calls the rest pending or corrected.
func TestCountsTheVersionsTheContractCounts(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 3))
	keys := []string{genai.AttrMergeRevision, genai.AttrMergeStatus, genai.AttrCallerPending, genai.AttrCallerSettled}
	for i := 0; i < 3000; i++ {
		sp := ptrace.NewSpan()
		sp.SetName("chat gpt-4o")
		m := sp.Attributes()
		m.PutStr(genai.AttrOperationName, genai.OpChat)
		m.PutStr(genai.AttrRequestModel, "gpt-4o")
		m.PutInt(genai.AttrUsageInput, int64(1+rnd.IntN(100)))
		m.PutInt(genai.AttrUsageOutput, int64(rnd.IntN(100)))
		for _, k := range keys {
			switch rnd.IntN(6) {
			case 0:
				m.PutInt(k, int64(rnd.IntN(4))-1)
			case 1:
				m.PutDouble(k, float64(rnd.IntN(3)))
			case 2:
				m.PutBool(k, rnd.IntN(2) == 0)
			case 3:
				m.PutStr(k, []string{genai.MergeCorrected, genai.MergeMerged, "true"}[rnd.IntN(3)])
			}
		}
		var c call
		got := readCall(sp, &c)
		want := genai.VersionOf(m)
		switch {
		case want.Counted():
			assert.Equal(t, outcomes[outCounted], outcomes[got], "%v", m.AsRaw())
		case want.Pending:
			assert.Equal(t, outcomes[outPending], outcomes[got], "%v", m.AsRaw())
		default:
			assert.Equal(t, outcomes[outCorrected], outcomes[got], "%v", m.AsRaw())
		}
	}
}
