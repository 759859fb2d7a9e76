package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChainCommandJSON(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, dispatch([]string{"chain", "--json"}, &out, &errb), errb.String())
	var got struct {
		Middlewares []string            `json:"middlewares"`
		Hooks       map[string][]string `json:"hooks"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, "InputSanitizationMiddleware", got.Middlewares[0])
	assert.Equal(t, "ClarificationMiddleware", got.Middlewares[len(got.Middlewares)-1])
	assert.Len(t, got.Hooks, 6)
	assert.Equal(t, []string{"ToolOutputBudgetMiddleware", "ToolResultSanitizationMiddleware", "SandboxMiddleware",
		"SandboxAuditMiddleware", "ReadBeforeWriteMiddleware", "ToolErrorHandlingMiddleware", "ClarificationMiddleware"}, got.Hooks["wrap_tool_call"])
	assert.Equal(t, []string{"SafetyFinishReasonMiddleware", "ModelLengthFinishReasonMiddleware", "TerminalResponseMiddleware",
		"LoopDetectionMiddleware", "SubagentLimitMiddleware", "TitleMiddleware", "TokenUsageMiddleware", "DurableContextMiddleware"}, got.Hooks["after_model"])
	assert.Equal(t, []string{"DurableContextMiddleware"}, got.Hooks["before_model"])
}

func TestChainCommandConfigAndText(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
models:
  - {name: main, provider: openai, model: gpt-4o, api_key_env: SOME_UNSET_KEY, supports_vision: true}
settings:
  plan_mode: {enabled: true}
  subagent: {enabled: false}
loop_detection: {enabled: false}
`), 0o600))
	var out, errb bytes.Buffer
	require.Equal(t, 0, dispatch([]string{"chain", "--config", cfg}, &out, &errb), errb.String())
	text := out.String()
	assert.Contains(t, text, "TodoMiddleware")
	assert.Contains(t, text, "ViewImageMiddleware", "vision model from the config, without building the provider")
	assert.NotContains(t, text, "LoopDetectionMiddleware")
	assert.NotContains(t, text, "SubagentLimitMiddleware")
	assert.Contains(t, text, "after_model      (reverse list order): SafetyFinishReasonMiddleware → ")

	require.NoError(t, os.WriteFile(cfg, []byte("models:\n  - {name: main, provider: scripted}\nloop_detection:\n  warn_treshold: 3\n"), 0o600))
	out.Reset()
	errb.Reset()
	assert.Equal(t, 1, dispatch([]string{"chain", "--config", cfg}, &out, &errb))
	assert.Contains(t, errb.String(), "warn_treshold")
	assert.Equal(t, 2, dispatch([]string{"chain", "extra"}, &out, &errb))
}
