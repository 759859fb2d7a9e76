package ids

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// the allocating implementations hexInto and SpanID replaced
func refHexBytes(s string, n int) ([]byte, bool) {
	if n == 16 && len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		s = strings.ReplaceAll(s, "-", "")
	}
	if len(s) != 2*n {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, false
	}
	for _, c := range b {
		if c != 0 {
			return b, true
		}
	}
	return nil, false
}

func refSpanID(namespace, s string) pcommon.SpanID {
	sum := sha256.Sum256([]byte("agentusage/span\x00" + namespace + "\x00" + s))
	var id pcommon.SpanID
	copy(id[:], sum[:8])
	if id.IsEmpty() {
		id[7] = 1
	}
	return id
}

func FuzzHexIntoMatchesReference(f *testing.F) {
	for _, s := range []string{"01a22a31-cdc6-7000-8000-000000000001", "01A22A31CDC670008000000000000001", "00000000-0000-0000-0000-000000000000",
		"01a22a31-cdc6-7000-8000-00000000000-", "01a22a31-cdc6-7000-8000-0000-0000000", "xyz", "", "0g", strings.Repeat("ab", 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantOK := refHexBytes(s, 16)
		var got [16]byte
		ok := hexInto(got[:], s)
		assert.Equal(t, wantOK, ok, "%q", s)
		if ok {
			assert.Equal(t, want, got[:])
		}
		assert.Equal(t, wantOK, IsUUIDOrHex(s))
		if wantOK {
			assert.Equal(t, pcommon.TraceID(want), TraceID(s))
		}
		assert.Equal(t, refSpanID("langsmith/run", s), SpanID("langsmith/run", s))
		assert.Equal(t, refSpanID(s, strings.Repeat(s, 20)), SpanID(s, strings.Repeat(s, 20)))
	})
}
