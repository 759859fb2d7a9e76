package pricing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultTableLoads(t *testing.T) {
	tab, err := New(Layer{Name: "default", Rows: DefaultRows()})
	require.NoError(t, err)
	require.Greater(t, tab.Rows(), 50)
	r, ok := tab.Lookup("anthropic", "claude-sonnet-4-5-20250929", time.Now())
	require.True(t, ok)
	require.Equal(t, "anthropic/claude-sonnet-4-5@2025-09-29", r.ID)
}
