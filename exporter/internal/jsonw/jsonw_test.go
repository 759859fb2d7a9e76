package jsonw

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r", "\x00\x01\x1f", "héllo ✓ 𝄞", "bad \xff utf8", "sep\u2028\u2029", "<html>&"} {
		got := AppendString(nil, s)
		require.True(t, json.Valid(got), "%q -> %s", s, got)
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		want, _ := json.Marshal(s)
		var wantBack string
		require.NoError(t, json.Unmarshal(want, &wantBack))
		assert.Equal(t, wantBack, back, "%q", s)
	}
}
