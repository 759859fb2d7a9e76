package pricing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultTableLoads(t *testing.T) {
	ds := DefaultDataset()
	assert.Equal(t, "@pydantic/genai-prices", ds.Name)
	assert.NotEmpty(t, ds.Version)
	_, err := time.Parse(time.DateOnly, ds.Date)
	require.NoError(t, err, "the snapshot records its dataset's date")
	tab, err := New(DefaultLayers()...)
	require.NoError(t, err)
	require.Greater(t, tab.Rows(), 1500)
	r, ok := tab.Lookup("anthropic", "claude-sonnet-4-5-20250929", time.Now())
	require.True(t, ok)
	require.Equal(t, "anthropic/claude-sonnet-4-5", r.ID)
	// the one-list form prices the same
	flat, err := New(Layer{Name: "default", Rows: DefaultRows()})
	require.NoError(t, err)
	r2, ok := flat.Lookup("", "claude-sonnet-4-5-20250929", time.Now())
	require.True(t, ok)
	assert.Equal(t, r.Base, r2.Base)
}

// Every override says why and where from, and replaces a model the dataset has.
func TestOverridesAreExplained(t *testing.T) {
	models := map[string]bool{}
	for _, r := range DefaultDataset().Rows {
		models[r.Provider+"/"+r.Model] = true
	}
	for i, o := range Overrides() {
		assert.NotEmpty(t, o.Source, "overrides[%d] source", i)
		assert.NotEmpty(t, o.Reason, "overrides[%d] reason", i)
		assert.True(t, models[o.Provider+"/"+o.Model], "overrides[%d] %s/%s is not a dataset model", i, o.Provider, o.Model)
	}
}
