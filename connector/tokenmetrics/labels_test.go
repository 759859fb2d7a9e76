package tokenmetrics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// A label value past genai.MaxLabelBytes (from a receiver that does not refuse it) is
// truncated to the bound at a character boundary, in every set and on the resource; a
// value at the bound is kept whole.
func TestLongLabelValuesAreTruncated(t *testing.T) {
	h := newHarness(t, nil)
	// 255 ASCII bytes then a 3-byte character that crosses the bound
	long := strings.Repeat("m", genai.MaxLabelBytes-1) + "€" + strings.Repeat("x", 1<<20)
	atBound := strings.Repeat("p", genai.MaxLabelBytes)
	h.send(newTrace(long).chat(long, genai.Usage{Input: 5, Output: 1}, map[string]any{
		genai.AttrProviderName: atBound,
		genai.AttrCaller:       "subagent:" + long,
	}).traces())
	want := strings.Repeat("m", genai.MaxLabelBytes-1)
	pts := latest(t, h.sink)
	require.NotEmpty(t, pts)
	seen := 0
	for name, p := range pts {
		for k, v := range p.attrs {
			s, ok := v.(string)
			require.True(t, !ok || len(s) <= genai.MaxLabelBytes, "%s: %s has %d bytes", name, k, len(s))
		}
		assert.Equal(t, want, p.resource[genai.AttrServiceName], name)
		if m, ok := p.attrs[genai.LabelModel]; ok {
			assert.Equal(t, want, m, name)
			assert.Equal(t, atBound, p.attrs[genai.LabelProvider], name)
			assert.Equal(t, strings.Repeat("m", genai.MaxLabelBytes-len("subagent:")), p.attrs[genai.LabelAgent], name)
			seen++
		}
		if m, ok := p.attrs[genai.AttrRequestModel]; ok {
			assert.Equal(t, want, m, name)
			seen++
		}
	}
	assert.Positive(t, seen, "the model label was checked")
	assert.Equal(t, float64(6), total(t, pts, genai.MetricTokens, map[string]any{genai.LabelModel: want}), "the call still counts")
}
