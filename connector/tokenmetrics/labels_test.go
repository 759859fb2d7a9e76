package tokenmetrics

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// A label value past genai.MaxLabelBytes (from a receiver that does not refuse it) is
// truncated to the bound at a character boundary, in every set and on the resource; a
// value at the bound is kept whole. A value that is not UTF-8 gets one U+FFFD for each
// run of invalid bytes, and is still bounded: the Prometheus exporter drops a series
// whose label is not UTF-8, and the call's tokens with it.
func TestLabelValuesAreBoundedAndUTF8(t *testing.T) {
	// 255 ASCII bytes then a 3-byte character that crosses the bound
	long := strings.Repeat("m", genai.MaxLabelBytes-1) + "€" + strings.Repeat("x", 1<<20)
	cut := strings.Repeat("m", genai.MaxLabelBytes-1)
	for _, tc := range []struct {
		name                                string
		service, model, provider, agent     string // sent (agent: in the caller tag)
		wService, wModel, wProvider, wAgent string
	}{
		{
			name:    "too long",
			service: long, model: long, provider: strings.Repeat("p", genai.MaxLabelBytes), agent: long,
			wService: cut, wModel: cut, wProvider: strings.Repeat("p", genai.MaxLabelBytes),
			wAgent: strings.Repeat("m", genai.MaxLabelBytes-len("subagent:")),
		},
		{
			// the provider's U+FFFD (three bytes) crosses the bound: the cut drops it whole
			name:    "not UTF-8",
			service: "svc\xe4-agent", model: "gpt-4o\xff\xfe-mini",
			provider: strings.Repeat("m", genai.MaxLabelBytes-2) + "\xff" + strings.Repeat("x", 10), agent: "res\xc3earcher",
			wService: "svc\uFFFD-agent", wModel: "gpt-4o\uFFFD-mini",
			wProvider: strings.Repeat("m", genai.MaxLabelBytes-2), wAgent: "res\uFFFDearcher",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.send(newTrace(tc.service).chat(tc.model, genai.Usage{Input: 5, Output: 1}, map[string]any{
				genai.AttrProviderName: tc.provider,
				genai.AttrCaller:       "subagent:" + tc.agent,
			}).traces())
			pts := latest(t, h.sink)
			require.NotEmpty(t, pts)
			seen := 0
			for name, p := range pts {
				for k, v := range p.attrs {
					s, ok := v.(string)
					require.True(t, !ok || (utf8.ValidString(s) && len(s) <= genai.MaxLabelBytes), "%s: %s = %q", name, k, s)
				}
				assert.Equal(t, tc.wService, p.resource[genai.AttrServiceName], name)
				if m, ok := p.attrs[genai.LabelModel]; ok {
					assert.Equal(t, tc.wModel, m, name)
					assert.Equal(t, tc.wProvider, p.attrs[genai.LabelProvider], name)
					assert.Equal(t, tc.wAgent, p.attrs[genai.LabelAgent], name)
					seen++
				}
				if m, ok := p.attrs[genai.AttrRequestModel]; ok {
					assert.Equal(t, tc.wModel, m, name)
					seen++
				}
			}
			assert.Positive(t, seen, "the model label was checked")
			assert.Equal(t, float64(6), total(t, pts, genai.MetricTokens, map[string]any{genai.LabelModel: tc.wModel}), "the call still counts")
		})
	}
}
