package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type demoPrice struct {
	Input     float64 `yaml:"input"`
	Output    float64 `yaml:"output"`
	CacheRead float64 `yaml:"cache_read"`
}

// The collector side of the demo (overlay.yaml's genaicost rows) prices the scripted
// models exactly as the agent's demo configuration does (its models[].pricing), so the
// journal's cost and the spans' cost can agree.
func TestDemoPricesAreTheSameOnBothSides(t *testing.T) {
	var overlay struct {
		Processors struct {
			Genaicost struct {
				Prices []struct {
					Provider  string `yaml:"provider"`
					Model     string `yaml:"model"`
					demoPrice `yaml:",inline"`
					Source    string `yaml:"source"`
				} `yaml:"prices"`
			} `yaml:"genaicost"`
		} `yaml:"processors"`
	}
	require.NoError(t, yaml.Unmarshal(overlayYAML, &overlay))
	b, err := os.ReadFile("../agentmeter/demo-config.yaml")
	require.NoError(t, err)
	var agent struct {
		Models []struct {
			Provider string     `yaml:"provider"`
			Model    string     `yaml:"model"`
			Pricing  *demoPrice `yaml:"pricing"`
		} `yaml:"models"`
	}
	require.NoError(t, yaml.Unmarshal(b, &agent))

	want := map[string]demoPrice{}
	for _, m := range agent.Models {
		require.NotNil(t, m.Pricing, "every demo model has a demo price: %s", m.Model)
		want[m.Provider+"/"+m.Model] = *m.Pricing
	}
	got := map[string]demoPrice{}
	for _, p := range overlay.Processors.Genaicost.Prices {
		got[p.Provider+"/"+p.Model] = p.demoPrice
		assert.NotEmpty(t, p.Source)
	}
	assert.Equal(t, want, got)
	assert.Len(t, want, 2, "the lead's and the subagents' scripted models")
}
