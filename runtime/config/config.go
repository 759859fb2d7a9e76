// Package config is the schema of config.yaml (docs/config.md): the models list, the
// subagent executor limits, the sandbox root, telemetry switches and sections registered by
// other packages (middleware settings), with strict decoding: an unknown key anywhere is an
// error naming the key.
package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Providers the runtime knows by name. Others may be registered with model.Register.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderScripted  = "scripted"
)

// Config is the whole config.yaml.
type Config struct {
	// Models: the first one is the default model of the lead agent and subagents.
	Models []Model `yaml:"models"`
	// Agent configures the lead agent.
	Agent Agent `yaml:"agent"`
	// Subagents configures the subagent executor and the task tool.
	Subagents Subagents `yaml:"subagents"`
	// Sandbox configures where thread workspaces live.
	Sandbox Sandbox `yaml:"sandbox"`
	// Telemetry configures span export (the OTEL_* variables still apply).
	Telemetry Telemetry `yaml:"telemetry"`
	// Sections holds registered extra top-level sections (see RegisterSection), decoded
	// into the value the registering package supplied, keyed by section name.
	Sections map[string]any `yaml:"-"`
}

// Model is one entry of models:. Name is how agents and middlewares refer to it.
type Model struct {
	Name     string `yaml:"name"`
	Provider string `yaml:"provider"` // openai | anthropic | scripted (or a registered one)
	Model    string `yaml:"model"`    // the provider's model id, e.g. gpt-4o-mini
	BaseURL  string `yaml:"base_url"` // optional endpoint override
	// APIKeyEnv names the environment variable holding the key; the key itself never
	// appears in the config file, logs or errors.
	APIKeyEnv string `yaml:"api_key_env"`
	// StreamUsage requests usage in streamed responses (OpenAI stream_options.include_usage).
	// Default true for every OpenAI-compatible endpoint; an explicit false is kept
	// (DeerFlow's stream_usage default). Ignored by providers without the option.
	StreamUsage *bool `yaml:"stream_usage"`
	// Stream makes calls use the provider's streaming API (default true).
	Stream *bool `yaml:"stream"`
	// Script is the scripted provider's script file; empty means the embedded demo script.
	Script           string         `yaml:"script"`
	SupportsVision   bool           `yaml:"supports_vision"`
	SupportsThinking bool           `yaml:"supports_thinking"`
	ContextWindow    int            `yaml:"context_window"`
	MaxTokens        int            `yaml:"max_tokens"`
	Temperature      *float64       `yaml:"temperature"`
	Timeout          time.Duration  `yaml:"timeout"` // streaming: per chunk (DeerFlow's stream_chunk_timeout); else per call; default 240s
	Pricing          *Pricing       `yaml:"pricing"`
	Options          map[string]any `yaml:"options"` // provider-specific extras, passed through
}

// Pricing is the model's price (USD per million tokens), used by the run journal's cost keys
// in place of the default price table's row for this model id (see PriceTable); it is
// never sent to a provider.
type Pricing struct {
	Input     float64 `yaml:"input"`
	Output    float64 `yaml:"output"`
	CacheRead float64 `yaml:"cache_read"`
}

// Agent configures the lead agent loop.
type Agent struct {
	// Model names the lead agent's model; default: the first of models.
	Model string `yaml:"model"`
	// SystemPrompt is prepended as a system message.
	SystemPrompt string `yaml:"system_prompt"`
	// RecursionLimit bounds graph steps per run (LangGraph's recursion_limit, default 100).
	RecursionLimit int `yaml:"recursion_limit"`
	// Tools lists the enabled built-in tools; empty means all.
	Tools []string `yaml:"tools"`
}

// Subagents configures the subagent executor (DeerFlow subagents config).
type Subagents struct {
	// Enabled turns the task tool on (default true).
	Enabled *bool `yaml:"enabled"`
	// Model names the subagents' model; default: the lead agent's.
	Model string `yaml:"model"`
	// MaxConcurrent bounds subagents running at once per run (default 3).
	MaxConcurrent int `yaml:"max_concurrent"`
	// Timeout bounds one subagent execution (default 15m).
	Timeout time.Duration `yaml:"timeout"`
	// MaxTurns is a subagent's recursion limit (default 50).
	MaxTurns int `yaml:"max_turns"`
}

// Sandbox configures the local sandbox.
type Sandbox struct {
	// Root is the folder holding one workspace per thread (default: $TMPDIR/agentmeter/threads).
	Root string `yaml:"root"`
	// BashTimeout bounds one bash command (default 60s).
	BashTimeout time.Duration `yaml:"bash_timeout"`
}

// Telemetry configures the tracer provider.
type Telemetry struct {
	// Enabled turns span export on (default true; OTEL_SDK_DISABLED=true also turns it off).
	Enabled *bool `yaml:"enabled"`
	// ServiceName is service.name (default "agentmeter", OTEL_SERVICE_NAME wins).
	ServiceName string `yaml:"service_name"`
	// CaptureContent records prompts and completions on spans (default false).
	CaptureContent bool `yaml:"capture_content"`
	// ExportTimeout bounds one export and the final flush (default 5s).
	ExportTimeout time.Duration `yaml:"export_timeout"`
}

// BoolOr returns *b, or def when b is nil.
func BoolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// APIKey reads the model's key from the variable api_key_env names, else from
// defaultEnv (the provider's usual variable); it returns the variable read and the key
// ("" when that variable is unset).
func (m Model) APIKey(defaultEnv string) (envName, key string) {
	envName = m.APIKeyEnv
	if envName == "" {
		envName = defaultEnv
	}
	return envName, os.Getenv(envName)
}

// StreamUsageEnabled applies DeerFlow's default: true unless explicitly false.
func (m Model) StreamUsageEnabled() bool { return BoolOr(m.StreamUsage, true) }

// StreamEnabled reports whether calls stream (default true).
func (m Model) StreamEnabled() bool { return BoolOr(m.Stream, true) }

// CallTimeout is the timeout with its default: the longest wait for the next chunk of a
// streamed response, or for a whole non-streamed one.
func (m Model) CallTimeout() time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return 240 * time.Second
}

// Defaults used when a field is zero.
const (
	DefaultRecursionLimit        = 100
	DefaultSubagentConcurrency   = 3
	DefaultSubagentTimeout       = 15 * time.Minute
	DefaultSubagentMaxTurns      = 50
	DefaultBashTimeout           = 60 * time.Second
	DefaultTelemetryExportTimout = 5 * time.Second
)

// ApplyDefaults fills zero fields with their defaults.
func (c *Config) ApplyDefaults() {
	if c.Agent.RecursionLimit == 0 {
		c.Agent.RecursionLimit = DefaultRecursionLimit
	}
	if c.Subagents.MaxConcurrent == 0 {
		c.Subagents.MaxConcurrent = DefaultSubagentConcurrency
	}
	if c.Subagents.Timeout == 0 {
		c.Subagents.Timeout = DefaultSubagentTimeout
	}
	if c.Subagents.MaxTurns == 0 {
		c.Subagents.MaxTurns = DefaultSubagentMaxTurns
	}
	if c.Sandbox.BashTimeout == 0 {
		c.Sandbox.BashTimeout = DefaultBashTimeout
	}
	if c.Telemetry.ExportTimeout == 0 {
		c.Telemetry.ExportTimeout = DefaultTelemetryExportTimout
	}
	if c.Telemetry.ServiceName == "" {
		c.Telemetry.ServiceName = "agentmeter"
	}
}

// Validate collects every problem; messages are lower-case and name the YAML key.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Models) == 0 {
		errs = append(errs, errors.New("models: at least one model is required"))
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		at := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name is required", at))
		} else if seen[m.Name] {
			errs = append(errs, fmt.Errorf("%s.name %q is used twice", at, m.Name))
		}
		seen[m.Name] = true
		if m.Provider == "" {
			errs = append(errs, fmt.Errorf("%s.provider is required (openai, anthropic or scripted)", at))
		}
		if m.Model == "" && m.Provider != ProviderScripted {
			errs = append(errs, fmt.Errorf("%s.model is required", at))
		}
		if m.BaseURL != "" && !strings.HasPrefix(m.BaseURL, "http://") && !strings.HasPrefix(m.BaseURL, "https://") {
			errs = append(errs, fmt.Errorf("%s.base_url must start with http:// or https://", at))
		}
		if m.ContextWindow < 0 {
			errs = append(errs, fmt.Errorf("%s.context_window must not be negative", at))
		}
		if m.MaxTokens < 0 {
			errs = append(errs, fmt.Errorf("%s.max_tokens must not be negative", at))
		}
		if m.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s.timeout must not be negative", at))
		}
	}
	if c.Agent.Model != "" && !seen[c.Agent.Model] {
		errs = append(errs, fmt.Errorf("agent.model %q is not one of models", c.Agent.Model))
	}
	if c.Subagents.Model != "" && !seen[c.Subagents.Model] {
		errs = append(errs, fmt.Errorf("subagents.model %q is not one of models", c.Subagents.Model))
	}
	if c.Agent.RecursionLimit < 0 {
		errs = append(errs, errors.New("agent.recursion_limit must not be negative"))
	}
	if c.Subagents.MaxConcurrent < 0 {
		errs = append(errs, errors.New("subagents.max_concurrent must not be negative"))
	}
	if c.Subagents.Timeout < 0 {
		errs = append(errs, errors.New("subagents.timeout must not be negative"))
	}
	if c.Subagents.MaxTurns < 0 {
		errs = append(errs, errors.New("subagents.max_turns must not be negative"))
	}
	for name, v := range c.Sections {
		if val, ok := v.(interface{ Validate() error }); ok {
			if err := val.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ModelByName returns the model called name; "" means the default (first) model.
func (c *Config) ModelByName(name string) (Model, bool) {
	if len(c.Models) == 0 {
		return Model{}, false
	}
	if name == "" {
		return c.Models[0], true
	}
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}
