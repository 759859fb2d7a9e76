package middleware

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/config"
)

// DeerFlow's middleware config skeleton, as users copy it, in YAML
// (docs/middleware.md#configuration).
const seedYAML = `
models:
  - name: lead
    provider: scripted
    supports_vision: true
  - name: title
    provider: scripted
circuit_breaker:
  enabled: true
  failure_threshold: 5
  recovery_timeout_sec: 30
  base_delay_ms: 500
  cap_delay_ms: 8000
guardrails:
  enabled: false
  provider: ""
  fail_closed: true
token_usage:
  enabled: true
loop_detection:
  enabled: true
  window_size: 20
  warn_threshold: 30
  hard_limit: 50
  tool_freq_overrides:
    bash: {warn: 80, hard_limit: 120}
safety_finish_reason:
  enabled: true
tool_search:
  enabled: false
summarization:
  enabled: true
  max_tokens_before_summary: 120000
  skill_rescue_max_bundles: 5
  skill_rescue_max_tokens: 25000
title:
  model_name: title
  max_words: 8
  max_chars: 50
  prompt_template: "Title in at most {max_words} words.\nUser: {user_msg}\nAssistant: {assistant_msg}"
settings:
  runtime: {base_dir: ./runtime, threads_dir: ./runtime/threads, lazy_init: true}
  sandbox: {provider: local, lazy_init: true, reuse_within_thread: true, shutdown_on_app_close: true}
  memory: {injection_enabled: true, queue_batch_size: 8}
  subagent: {enabled: true, max_concurrent: 3}
  plan_mode: {enabled: true, max_completion_reminders: 2}
`

func TestSeedSkeletonLoads(t *testing.T) {
	cfg, err := config.Parse([]byte(seedYAML))
	require.NoError(t, err)
	mc := ConfigFrom(cfg)
	assert.Equal(t, CircuitBreakerConfig{Enabled: true, FailureThreshold: 5, RecoveryTimeoutSec: 30, BaseDelayMS: 500, CapDelayMS: 8000,
		BurstBaseDelayMS: 5000, RetryMaxAttempts: 3}, mc.CircuitBreaker)
	assert.Equal(t, 30, mc.LoopDetection.WarnThreshold)
	assert.Equal(t, 50, mc.LoopDetection.HardLimit)
	assert.Equal(t, ToolFreqOverride{Warn: 80, HardLimit: 120}, mc.LoopDetection.ToolFreqOverrides["bash"])
	assert.Equal(t, 100, mc.LoopDetection.MaxTrackedThreads, "keys left out keep their defaults")
	assert.True(t, mc.Summarization.Enabled)
	assert.Equal(t, 120000, mc.Summarization.MaxTokensBeforeSummary)
	assert.Equal(t, 20, mc.Summarization.KeepMessages)
	assert.Equal(t, "title", mc.Title.ModelName)
	assert.Equal(t, 8, mc.Title.MaxWords)
	assert.Equal(t, "./runtime", mc.Settings.Runtime.BaseDir)
	assert.True(t, mc.Settings.PlanMode.Enabled)
	assert.True(t, mc.Settings.Memory.Enabled, "default kept")
	assert.Equal(t, 6, mc.Settings.Subagent.MaxTotalPerRun)

	chain, err := BuildMiddlewares(Options{Config: mc, Model: visionModel{true}})
	require.NoError(t, err)
	names := Names(chain)
	assert.Contains(t, names, NameSummarization)
	assert.Contains(t, names, NameTodo)
	assert.Contains(t, names, NameViewImage)
}

func TestConfigDefaultsWithoutSections(t *testing.T) {
	cfg, err := config.Parse([]byte("models:\n  - {name: m, provider: scripted}\n"))
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), ConfigFrom(cfg))
	d := DefaultConfig()
	assert.True(t, d.TokenUsage.Enabled)
	assert.True(t, d.LoopDetection.Enabled)
	assert.True(t, d.SafetyFinishReason.Enabled)
	assert.False(t, d.Summarization.Enabled)
	assert.False(t, d.TokenBudget.Enabled)
	assert.False(t, d.Guardrails.Enabled)
	assert.True(t, d.Guardrails.FailClosed)
	assert.Equal(t, 60, d.CircuitBreaker.RecoveryTimeoutSec)
}

func TestConfigUnknownKeysAndBadValuesNameTheKey(t *testing.T) {
	base := "models:\n  - {name: m, provider: scripted}\n"
	for yaml, want := range map[string]string{
		"loop_detection:\n  warn_treshold: 3\n":              "warn_treshold",
		"circuit_breaker:\n  failure_threshhold: 3\n":        "failure_threshhold",
		"title:\n  max_word: 3\n":                            "max_word",
		"settings:\n  runtime:\n    basedir: x\n":            "basedir",
		"app_config:\n  token_usage: {enabled: true}\n":      "app_config",
		"title:\n  max_words: 40\n":                          "title: max_words must be between 1 and 20",
		"circuit_breaker:\n  failure_threshold: 0\n":         "circuit_breaker: failure_threshold must be at least 1",
		"circuit_breaker:\n  cap_delay_ms: 10\n":             "cap_delay_ms must be at least base_delay_ms",
		"loop_detection:\n  hard_limit: 1\n":                 "loop_detection: hard_limit must be at least warn_threshold",
		"guardrails:\n  enabled: true\n  provider: nope\n":   `guardrails: provider "nope" is not a built-in provider (built in: tool_policy)`,
		"summarization:\n  summary_prompt: no placeholder\n": "summary_prompt must contain {messages}",
		"token_budget:\n  warn_ratio: 2\n":                   "warn_ratio must be positive and at most hard_ratio",
		"settings:\n  sandbox: {provider: docker}\n":         `sandbox.provider "docker" is not supported`,
		"extensions:\n  middlewares: [nope]\n":               `extensions: middlewares[0]: "nope" is not a registered extension middleware`,
	} {
		_, err := config.Parse([]byte(base + yaml))
		require.Error(t, err, yaml)
		assert.ErrorContains(t, err, want, yaml)
	}
}

// testdata/config.yaml lists every section with its defaults: loading it must give
// DefaultConfig (plus the two values it sets differently).
func TestExampleConfigIsTheDefaults(t *testing.T) {
	cfg, err := config.LoadFile(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	want := DefaultConfig()
	want.LoopDetection.ToolFreqOverrides = map[string]ToolFreqOverride{"bash": {Warn: 80, HardLimit: 120}}
	want.Summarization.MaxTokensBeforeSummary = 32000
	want.Guardrails.Provider = "tool_policy"
	want.Guardrails.DenyTools, want.Guardrails.AllowTools = []string{}, []string{}
	want.SafetyFinishReason.ExtraFinishReasons = []string{}
	want.ToolOutput.Overrides = map[string]int{}
	want.Extensions.Middlewares = []string{}
	want.Settings.Runtime.BaseDir = "/var/lib/agentmeter"
	assert.Equal(t, want, ConfigFrom(cfg))
}
