package timestamps

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTime(t *testing.T) {
	want := time.Date(2026, 11, 30, 2, 3, 56, 742001000, time.UTC)
	for _, v := range []any{
		"2026-11-30T02:03:56.742001Z",
		"2026-11-30T03:03:56.742001+01:00",
		"2026-11-30T02:03:56.742001", // Python isoformat, no offset
		json.Number("1796004236742001"),
	} {
		got, err := parseTime(v)
		require.NoError(t, err, v)
		assert.True(t, want.Equal(got), "%v → %v", v, got)
	}
	ms, err := parseTime(float64(1796004236742))
	require.NoError(t, err)
	assert.Equal(t, want.Truncate(time.Millisecond), ms)
	s, err := parseTime(json.Number("1796004236"))
	require.NoError(t, err)
	assert.Equal(t, want.Truncate(time.Second), s)
	for _, bad := range []any{"noon", true, nil, float64(-1), map[string]any{}} {
		_, err := parseTime(bad)
		assert.ErrorIs(t, err, ErrBadTime, "%v", bad)
	}
}
