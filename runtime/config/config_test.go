package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFullShape(t *testing.T) {
	cfg, err := Parse([]byte(`
models:
  - name: main
    provider: openai
    model: gpt-4o-mini
    base_url: http://127.0.0.1:8080/v1
    api_key_env: OPENAI_API_KEY
    stream_usage: false
    supports_vision: true
    context_window: 128000
    pricing: {input: 0.15, output: 0.6}
    timeout: 30s
  - name: demo
    provider: scripted
agent: {model: main, recursion_limit: 40, system_prompt: "be brief"}
subagents: {model: demo, max_concurrent: 2, timeout: 90s}
sandbox: {root: /tmp/x, bash_timeout: 5s}
telemetry: {capture_content: true}
`))
	require.NoError(t, err)
	m := cfg.Models[0]
	assert.Equal(t, "gpt-4o-mini", m.Model)
	assert.False(t, m.StreamUsageEnabled(), "explicit false kept")
	assert.True(t, cfg.Models[1].StreamUsageEnabled(), "default true")
	assert.Equal(t, 30*time.Second, m.CallTimeout())
	assert.Equal(t, 240*time.Second, cfg.Models[1].CallTimeout())
	assert.Equal(t, 0.6, m.Pricing.Output)
	assert.Equal(t, 40, cfg.Agent.RecursionLimit)
	assert.Equal(t, 90*time.Second, cfg.Subagents.Timeout)
	assert.Equal(t, DefaultSubagentMaxTurns, cfg.Subagents.MaxTurns)
	assert.Equal(t, 5*time.Second, cfg.Sandbox.BashTimeout)
	assert.Equal(t, "agentmeter", cfg.Telemetry.ServiceName)
	def, ok := cfg.ModelByName("")
	assert.True(t, ok)
	assert.Equal(t, "main", def.Name, "first model is the default")
}

func TestUnknownKeysNameTheKey(t *testing.T) {
	for src, want := range map[string]string{
		"models:\n  - name: a\n    provider: scripted\n    modle: x\n":         `line 4: unknown key "modle"`,
		"models:\n  - {name: a, provider: scripted}\ntitle: {enabled: true}\n": `line 3: unknown key "title"`,
		"models:\n  - {name: a, provider: scripted}\nagent: {recursion: 3}\n":  `line 3: unknown key "recursion"`,
	} {
		_, err := Parse([]byte(src))
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
	}
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`
models:
  - {name: a, provider: openai, base_url: ftp://x}
  - {name: a, model: m}
agent: {model: nope}
subagents: {max_concurrent: -1}
`))
	require.Error(t, err)
	for _, want := range []string{
		"models[0].model is required", "models[0].base_url must start with http:// or https://",
		`models[1].name "a" is used twice`, "models[1].provider is required",
		`agent.model "nope" is not one of models`, "subagents.max_concurrent must not be negative",
	} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = Parse([]byte("agent: {}\n"))
	assert.ErrorContains(t, err, "models: at least one model is required")
}

type titleSection struct {
	Enabled  bool `yaml:"enabled"`
	MaxWords int  `yaml:"max_words"`
}

func (s *titleSection) Validate() error {
	if s.MaxWords < 1 || s.MaxWords > 20 {
		return errMaxWords
	}
	return nil
}

var errMaxWords = os.ErrInvalid

func TestRegisteredSections(t *testing.T) {
	RegisterSection("test_title", func() any { return &titleSection{Enabled: true, MaxWords: 6} })
	defer func() { sectionsMu.Lock(); delete(sections, "test_title"); sectionsMu.Unlock() }()
	cfg, err := Parse([]byte("models: [{name: a, provider: scripted}]\ntest_title: {max_words: 3}\n"))
	require.NoError(t, err)
	assert.Equal(t, &titleSection{Enabled: true, MaxWords: 3}, cfg.Sections["test_title"], "defaults kept, file wins")
	cfg, err = Parse([]byte("models: [{name: a, provider: scripted}]\n"))
	require.NoError(t, err)
	assert.Equal(t, &titleSection{Enabled: true, MaxWords: 6}, cfg.Sections["test_title"], "absent section gets defaults")
	_, err = Parse([]byte("models: [{name: a, provider: scripted}]\ntest_title: {max_wrds: 3}\n"))
	assert.ErrorContains(t, err, `test_title: line 2: unknown key "max_wrds"`)
	_, err = Parse([]byte("models: [{name: a, provider: scripted}]\ntest_title: {max_words: 30}\n"))
	assert.ErrorContains(t, err, "test_title: invalid argument")
	assert.Panics(t, func() { RegisterSection("models", func() any { return nil }) })
}

func TestExampleConfigLoads(t *testing.T) {
	path := filepath.Join("..", "..", "config.example.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("config.example.yaml missing: %v", err)
	}
	cfg, err := LoadFile(path)
	require.NoError(t, err)
	assert.NotEmpty(t, cfg.Models)
	_, err = LoadFile("/nonexistent.yaml")
	assert.ErrorContains(t, err, "read config")
}

func TestModelAPIKey(t *testing.T) {
	t.Setenv("AGENTMETER_TEST_DEFAULT_KEY", "from-default")
	t.Setenv("AGENTMETER_TEST_NAMED_KEY", "from-named")
	name, key := Model{}.APIKey("AGENTMETER_TEST_DEFAULT_KEY")
	assert.Equal(t, "AGENTMETER_TEST_DEFAULT_KEY", name)
	assert.Equal(t, "from-default", key)
	name, key = Model{APIKeyEnv: "AGENTMETER_TEST_NAMED_KEY"}.APIKey("AGENTMETER_TEST_DEFAULT_KEY")
	assert.Equal(t, "AGENTMETER_TEST_NAMED_KEY", name)
	assert.Equal(t, "from-named", key)
	name, key = Model{APIKeyEnv: "AGENTMETER_TEST_UNSET_KEY"}.APIKey("AGENTMETER_TEST_DEFAULT_KEY")
	assert.Equal(t, "AGENTMETER_TEST_UNSET_KEY", name, "a named variable is not replaced by the default")
	assert.Empty(t, key)
}
