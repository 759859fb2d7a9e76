package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestRunJSONDemoOffline(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	cfg := writeConfig(t, "models: [{name: main, provider: scripted}]\nsandbox: {root: "+t.TempDir()+"}\n")
	var out, errb bytes.Buffer
	code := dispatch([]string{"run", "--config", cfg, "--thread", "t-1", "--json", "Compare", "Paris", "and", "Tokyo"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	keys := []string{}
	for k := range got {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"answer", "thread_id", "run_id", "trace_id", "completion"}, keys)
	var res runOutput
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, "t-1", res.ThreadID)
	assert.Contains(t, res.Answer, "Tokyo")
	c := res.Completion
	assert.Equal(t, int64(13152), c.TotalTokens, "the demo script's exact usage")
	assert.Equal(t, int64(9144), c.LeadAgentTokens)
	assert.Equal(t, int64(3822), c.SubagentTokens)
	assert.Equal(t, int64(186), c.MiddlewareTokens)
	assert.Equal(t, int64(6), c.LLMCallCount)
	assert.Equal(t, "Compare Paris and Tokyo", c.FirstHumanMessage)
	assert.Equal(t, int64(9330), c.TokenUsageByModel["scripted-demo"].TotalTokens)
	assert.Equal(t, int64(1152), c.TokenUsageByModel["scripted-demo-mini"].CacheReadTokens)
	var completion map[string]any
	require.NoError(t, json.Unmarshal(got["completion"], &completion))
	for _, k := range []string{"total_input_tokens", "total_output_tokens", "total_tokens", "llm_call_count", "lead_agent_tokens",
		"subagent_tokens", "middleware_tokens", "token_usage_by_model", "message_count", "last_ai_message", "first_human_message"} {
		assert.Contains(t, completion, k, "DeerFlow field name")
	}
}

func TestRunTextWithoutConfig(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	t.Setenv("TMPDIR", t.TempDir())
	var out, errb bytes.Buffer
	require.Equal(t, 0, dispatch([]string{"run", "hello"}, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "tokens: total 13152 (input 12397, output 755) in 6 model calls")
	assert.Contains(t, out.String(), "by caller: lead_agent 9144, subagent 3822, middleware 186")
	assert.Contains(t, out.String(), "scripted-demo-mini: total 3822")
}

func TestRunErrors(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	var out, errb bytes.Buffer
	assert.Equal(t, 2, dispatch([]string{"run"}, &out, &errb))
	assert.Contains(t, errb.String(), "a PROMPT is required")

	errb.Reset()
	bad := writeConfig(t, "models:\n  - name: a\n    provider: scripted\n    colour: red\n")
	assert.Equal(t, 1, dispatch([]string{"run", "--config", bad, "x"}, &out, &errb))
	assert.Contains(t, errb.String(), `line 4: unknown key "colour"`)

	errb.Reset()
	assert.Equal(t, 1, dispatch([]string{"run", "--config", writeConfig(t, "models: [{name: a, provider: scripted}]\n"), "--thread", "../x", "q"}, &out, &errb))
	assert.Contains(t, errb.String(), "--thread: sandbox: invalid thread id")

	errb.Reset()
	assert.Equal(t, 1, dispatch([]string{"run", "--config", writeConfig(t, "models: [{name: a, provider: scripted}]\nagent: {tools: [bash, nope]}\n"), "q"}, &out, &errb))
	assert.Contains(t, errb.String(), `agent.tools: unknown tool "nope"`)
}

// A run with no collector listening finishes promptly and prints exactly one warning.
func TestRunWithoutCollectorWarnsOnceAndFinishes(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	cfg := writeConfig(t, "models: [{name: main, provider: scripted}]\nsandbox: {root: "+t.TempDir()+"}\ntelemetry: {export_timeout: 1s}\n")
	var out, errb bytes.Buffer
	start := time.Now()
	require.Equal(t, 0, dispatch([]string{"run", "--config", cfg, "--json", "Compare Paris and Tokyo"}, &out, &errb))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, 1, strings.Count(errb.String(), "warning"), errb.String())
	var res runOutput
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, int64(13152), res.Completion.TotalTokens, "telemetry loss never changes the run")
	assert.Len(t, res.TraceID, 32)
}
