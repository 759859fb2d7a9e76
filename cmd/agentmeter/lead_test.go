package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
)

// NewLeadAgent is the one construction path of `run` and `serve`.
func TestNewLeadAgent(t *testing.T) {
	root := t.TempDir()
	cfg, err := config.Parse([]byte(demoConfigYAML + "sandbox: {root: " + root + "}\n"))
	require.NoError(t, err)
	lead, err := NewLeadAgent(cfg, LeadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "scripted-demo", lead.ModelName)
	assert.Equal(t, root, lead.SandboxRoot)
	sb, err := lead.Sandbox("t-1")
	require.NoError(t, err)
	assert.DirExists(t, sb.Root())
	_, err = lead.Sandbox("../x")
	assert.ErrorContains(t, err, "invalid thread id")

	cfg, err = config.Parse([]byte(demoConfigYAML + "agent: {tools: [bash, nope]}\n"))
	require.NoError(t, err)
	_, err = NewLeadAgent(cfg, LeadOptions{})
	assert.ErrorContains(t, err, `agent.tools: unknown tool "nope"`)
}
