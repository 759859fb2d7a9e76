package middleware

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/config"
)

// Config sections of config.yaml (docs/middleware.md): the names of the DeerFlow config
// skeleton users copy ([app_config.<section>]), DeerFlow's defaults. Each is registered
// with config.RegisterSection (the list below), so unknown keys are errors naming the key.
const (
	SectionCircuitBreaker     = "circuit_breaker"
	SectionGuardrails         = "guardrails"
	SectionTokenUsage         = "token_usage"
	SectionLoopDetection      = "loop_detection"
	SectionSafetyFinishReason = "safety_finish_reason"
	SectionToolSearch         = "tool_search"
	SectionSummarization      = "summarization"
	SectionTitle              = "title"
	SectionTokenBudget        = "token_budget"
	SectionThreadBudget       = "thread_budget"
	SectionExtensions         = "extensions"
	SectionSettings           = "settings"
	SectionToolOutput         = "tool_output"
	SectionReadBeforeWrite    = "read_before_write"
	SectionToolProgress       = "tool_progress"
)

// sections binds every section name to its type, its defaults and its field of Config:
// the one list init, DefaultConfig and ConfigFrom all read.
var sections = []section{
	typed(SectionCircuitBreaker, DefaultCircuitBreakerConfig, func(c *Config) *CircuitBreakerConfig { return &c.CircuitBreaker }),
	typed(SectionGuardrails, DefaultGuardrailsConfig, func(c *Config) *GuardrailsConfig { return &c.Guardrails }),
	typed(SectionTokenUsage, DefaultTokenUsageConfig, func(c *Config) *TokenUsageConfig { return &c.TokenUsage }),
	typed(SectionLoopDetection, DefaultLoopDetectionConfig, func(c *Config) *LoopDetectionConfig { return &c.LoopDetection }),
	typed(SectionSafetyFinishReason, DefaultSafetyFinishReasonConfig, func(c *Config) *SafetyFinishReasonConfig { return &c.SafetyFinishReason }),
	typed(SectionToolSearch, zero[ToolSearchConfig], func(c *Config) *ToolSearchConfig { return &c.ToolSearch }),
	typed(SectionSummarization, DefaultSummarizationConfig, func(c *Config) *SummarizationConfig { return &c.Summarization }),
	typed(SectionTitle, DefaultTitleConfig, func(c *Config) *TitleConfig { return &c.Title }),
	typed(SectionTokenBudget, DefaultTokenBudgetConfig, func(c *Config) *TokenBudgetConfig { return &c.TokenBudget }),
	typed(SectionThreadBudget, DefaultThreadBudgetConfig, func(c *Config) *ThreadBudgetConfig { return &c.ThreadBudget }),
	typed(SectionExtensions, zero[ExtensionsConfig], func(c *Config) *ExtensionsConfig { return &c.Extensions }),
	typed(SectionSettings, DefaultSettings, func(c *Config) *Settings { return &c.Settings }),
	typed(SectionToolOutput, DefaultToolOutputConfig, func(c *Config) *ToolOutputConfig { return &c.ToolOutput }),
	typed(SectionReadBeforeWrite, func() ReadBeforeWriteConfig { return ReadBeforeWriteConfig{Enabled: true} },
		func(c *Config) *ReadBeforeWriteConfig { return &c.ReadBeforeWrite }),
	typed(SectionToolProgress, DefaultToolProgressConfig, func(c *Config) *ToolProgressConfig { return &c.ToolProgress }),
}

func init() {
	for _, s := range sections {
		s.register()
	}
}

// section is one config.yaml section of Config, whatever its type.
type section interface {
	register()
	setDefault(out *Config)
	copyFrom(c *config.Config, out *Config)
	target(out *Config) any // the field it fills
}

// typedSection is a section of type T: config.RegisterSection decodes the YAML into a
// *T made from its defaults (so absent keys keep them) and validates it.
type typedSection[T any] struct {
	name  string
	def   func() T
	field func(*Config) *T
}

func typed[T any](name string, def func() T, field func(*Config) *T) section {
	return typedSection[T]{name: name, def: def, field: field}
}

func zero[T any]() T {
	var v T
	return v
}

func (s typedSection[T]) register() {
	config.RegisterSection(s.name, func() any { v := s.def(); return &v })
}

func (s typedSection[T]) setDefault(out *Config) { *s.field(out) = s.def() }

func (s typedSection[T]) target(out *Config) any { return s.field(out) }

func (s typedSection[T]) copyFrom(c *config.Config, out *Config) {
	if v, ok := c.Sections[s.name].(*T); ok {
		*s.field(out) = *v
	}
}

// CircuitBreakerConfig configures LLMErrorHandlingMiddleware (DeerFlow's circuit_breaker
// and llm_call settings; the seed puts the retry delays in this section).
type CircuitBreakerConfig struct {
	// Enabled turns the breaker on (default true); retries happen either way.
	Enabled bool `yaml:"enabled"`
	// FailureThreshold consecutive retriable failures open the circuit (default 5).
	FailureThreshold int `yaml:"failure_threshold"`
	// RecoveryTimeoutSec is how long the circuit stays open before one probe (default 60).
	RecoveryTimeoutSec int `yaml:"recovery_timeout_sec"`
	// BaseDelayMS and CapDelayMS bound the decorrelated-jitter backoff (default 1000, 8000).
	BaseDelayMS int `yaml:"base_delay_ms"`
	CapDelayMS  int `yaml:"cap_delay_ms"`
	// BurstBaseDelayMS is the base delay for burst-rate throttling (default 5000).
	BurstBaseDelayMS int `yaml:"burst_base_delay_ms"`
	// RetryMaxAttempts is the attempt budget per model call, first attempt included (default 3).
	RetryMaxAttempts int `yaml:"retry_max_attempts"`
	// MaxConcurrentCalls caps model calls in flight across the process (default 0 = unlimited).
	MaxConcurrentCalls int `yaml:"max_concurrent_calls"`
}

// DefaultCircuitBreakerConfig returns DeerFlow's defaults.
func DefaultCircuitBreakerConfig() CircuitBreakerConfig {
	return CircuitBreakerConfig{Enabled: true, FailureThreshold: 5, RecoveryTimeoutSec: 60, BaseDelayMS: 1000,
		CapDelayMS: 8000, BurstBaseDelayMS: 5000, RetryMaxAttempts: 3}
}

// Validate implements the config section contract.
func (c *CircuitBreakerConfig) Validate() error {
	var errs []error
	if c.FailureThreshold < 1 {
		errs = append(errs, errors.New("failure_threshold must be at least 1"))
	}
	if c.RecoveryTimeoutSec < 0 {
		errs = append(errs, errors.New("recovery_timeout_sec must not be negative"))
	}
	if c.BaseDelayMS < 0 {
		errs = append(errs, errors.New("base_delay_ms must not be negative"))
	}
	if c.CapDelayMS < c.BaseDelayMS {
		errs = append(errs, errors.New("cap_delay_ms must be at least base_delay_ms"))
	}
	if c.BurstBaseDelayMS < 0 {
		errs = append(errs, errors.New("burst_base_delay_ms must not be negative"))
	}
	if c.RetryMaxAttempts < 1 {
		errs = append(errs, errors.New("retry_max_attempts must be at least 1"))
	}
	if c.MaxConcurrentCalls < 0 {
		errs = append(errs, errors.New("max_concurrent_calls must not be negative"))
	}
	return errors.Join(errs...)
}

// GuardrailsConfig configures GuardrailMiddleware.
type GuardrailsConfig struct {
	// Enabled builds the middleware (default false); Provider names a registered
	// guardrail provider (built in: "tool_policy").
	Enabled  bool   `yaml:"enabled"`
	Provider string `yaml:"provider"`
	// FailClosed denies a tool call when the provider errors (default true).
	FailClosed bool `yaml:"fail_closed"`
	// DenyTools and AllowTools configure the built-in tool_policy provider.
	DenyTools  []string `yaml:"deny_tools"`
	AllowTools []string `yaml:"allow_tools"`
}

// DefaultGuardrailsConfig returns the defaults.
func DefaultGuardrailsConfig() GuardrailsConfig { return GuardrailsConfig{FailClosed: true} }

// Validate implements the config section contract.
func (c *GuardrailsConfig) Validate() error {
	if c.Enabled && strings.TrimSpace(c.Provider) != "" {
		return checkGuardrailProvider(c.Provider)
	}
	return nil
}

// TokenUsageConfig configures TokenUsageMiddleware.
type TokenUsageConfig struct {
	Enabled bool `yaml:"enabled"` // default true
}

// DefaultTokenUsageConfig returns the defaults.
func DefaultTokenUsageConfig() TokenUsageConfig { return TokenUsageConfig{Enabled: true} }

// ToolFreqOverride is a per-tool pair of layer-2 thresholds.
type ToolFreqOverride struct {
	Warn      int `yaml:"warn"`
	HardLimit int `yaml:"hard_limit"`
}

// LoopDetectionConfig configures LoopDetectionMiddleware (DeerFlow's
// deerflow/config/loop_detection_config.py).
type LoopDetectionConfig struct {
	Enabled           bool                        `yaml:"enabled"`              // default true
	WindowSize        int                         `yaml:"window_size"`          // default 20
	WarnThreshold     int                         `yaml:"warn_threshold"`       // default 3
	HardLimit         int                         `yaml:"hard_limit"`           // default 5
	MaxTrackedThreads int                         `yaml:"max_tracked_threads"`  // default 100
	ToolFreqWarn      int                         `yaml:"tool_freq_warn"`       // default 30
	ToolFreqHardLimit int                         `yaml:"tool_freq_hard_limit"` // default 50
	ToolFreqOverrides map[string]ToolFreqOverride `yaml:"tool_freq_overrides"`
}

// DefaultLoopDetectionConfig returns DeerFlow's defaults.
func DefaultLoopDetectionConfig() LoopDetectionConfig {
	return LoopDetectionConfig{Enabled: true, WindowSize: 20, WarnThreshold: 3, HardLimit: 5, MaxTrackedThreads: 100,
		ToolFreqWarn: 30, ToolFreqHardLimit: 50}
}

// Validate implements the config section contract.
func (c *LoopDetectionConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int
	}{{"window_size", c.WindowSize}, {"warn_threshold", c.WarnThreshold}, {"hard_limit", c.HardLimit},
		{"max_tracked_threads", c.MaxTrackedThreads}, {"tool_freq_warn", c.ToolFreqWarn}, {"tool_freq_hard_limit", c.ToolFreqHardLimit}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1", f.key))
		}
	}
	if c.HardLimit < c.WarnThreshold {
		errs = append(errs, errors.New("hard_limit must be at least warn_threshold"))
	}
	if c.ToolFreqHardLimit < c.ToolFreqWarn {
		errs = append(errs, errors.New("tool_freq_hard_limit must be at least tool_freq_warn"))
	}
	for _, name := range slices.Sorted(maps.Keys(c.ToolFreqOverrides)) {
		o := c.ToolFreqOverrides[name]
		if o.Warn < 1 {
			errs = append(errs, fmt.Errorf("tool_freq_overrides.%s.warn must be at least 1", name))
		}
		if o.HardLimit < o.Warn {
			errs = append(errs, fmt.Errorf("tool_freq_overrides.%s.hard_limit must be at least warn", name))
		}
	}
	return errors.Join(errs...)
}

// SafetyFinishReasonConfig configures SafetyFinishReasonMiddleware.
type SafetyFinishReasonConfig struct {
	Enabled bool `yaml:"enabled"` // default true
	// ExtraFinishReasons are more OpenAI-compatible finish_reason values treated as
	// safety stops besides content_filter (e.g. "sensitive", "violation").
	ExtraFinishReasons []string `yaml:"extra_finish_reasons"`
}

// DefaultSafetyFinishReasonConfig returns the defaults.
func DefaultSafetyFinishReasonConfig() SafetyFinishReasonConfig {
	return SafetyFinishReasonConfig{Enabled: true}
}

// ToolSearchConfig is tool_search (deferred MCP tools). agentmeter has no MCP tools, so
// the deferred set is always empty and McpRouting/DeferredToolFilter are never built;
// the key is accepted so the seed's config loads.
type ToolSearchConfig struct {
	Enabled bool `yaml:"enabled"`
}

// SummarizationConfig configures SummarizationMiddleware.
type SummarizationConfig struct {
	Enabled bool `yaml:"enabled"` // default false
	// MaxTokensBeforeSummary is the token trigger (0 = never summarise automatically).
	MaxTokensBeforeSummary int `yaml:"max_tokens_before_summary"`
	// KeepMessages is how many recent messages are kept verbatim (default 20).
	KeepMessages int `yaml:"keep_messages"`
	// TrimTokensToSummarize bounds the summarised text (default 4000).
	TrimTokensToSummarize int `yaml:"trim_tokens_to_summarize"`
	// ModelName is the summary model; empty = the run's own model.
	ModelName string `yaml:"model_name"`
	// SummaryPrompt is a template with {messages}; empty = the built-in prompt.
	SummaryPrompt string `yaml:"summary_prompt"`
	// SkillRescueMaxBundles and SkillRescueMaxTokens are accepted for the seed's
	// skeleton; agentmeter has no skills, so nothing is rescued by them.
	SkillRescueMaxBundles int `yaml:"skill_rescue_max_bundles"`
	SkillRescueMaxTokens  int `yaml:"skill_rescue_max_tokens"`
}

// DefaultSummarizationConfig returns DeerFlow's code defaults.
func DefaultSummarizationConfig() SummarizationConfig {
	return SummarizationConfig{KeepMessages: 20, TrimTokensToSummarize: 4000}
}

// Validate implements the config section contract.
func (c *SummarizationConfig) Validate() error {
	var errs []error
	if c.MaxTokensBeforeSummary < 0 {
		errs = append(errs, errors.New("max_tokens_before_summary must not be negative"))
	}
	if c.KeepMessages < 1 {
		errs = append(errs, errors.New("keep_messages must be at least 1"))
	}
	if c.TrimTokensToSummarize < 1 {
		errs = append(errs, errors.New("trim_tokens_to_summarize must be at least 1"))
	}
	if c.SummaryPrompt != "" && !strings.Contains(c.SummaryPrompt, "{messages}") {
		errs = append(errs, errors.New("summary_prompt must contain {messages}"))
	}
	return errors.Join(errs...)
}

// TitleConfig configures TitleMiddleware (DeerFlow's deerflow/config/title_config.py).
type TitleConfig struct {
	Enabled  bool `yaml:"enabled"`   // default true
	MaxWords int  `yaml:"max_words"` // default 6, 1..20
	MaxChars int  `yaml:"max_chars"` // default 60, 10..200
	// ModelName is the title model; empty = the run's own model (see docs/middleware.md).
	ModelName string `yaml:"model_name"`
	// PromptTemplate uses {max_words}, {user_msg} and {assistant_msg}.
	PromptTemplate string `yaml:"prompt_template"`
}

// DefaultTitlePrompt is DeerFlow's title prompt shape.
const DefaultTitlePrompt = "Generate a concise title (max {max_words} words) for this conversation.\nUser: {user_msg}\nAssistant: {assistant_msg}\n\nReturn ONLY the title, no quotes, no explanation."

// DefaultTitleConfig returns DeerFlow's defaults.
func DefaultTitleConfig() TitleConfig {
	return TitleConfig{Enabled: true, MaxWords: 6, MaxChars: 60, PromptTemplate: DefaultTitlePrompt}
}

// Validate implements the config section contract.
func (c *TitleConfig) Validate() error {
	var errs []error
	if c.MaxWords < 1 || c.MaxWords > 20 {
		errs = append(errs, errors.New("max_words must be between 1 and 20"))
	}
	if c.MaxChars < 10 || c.MaxChars > 200 {
		errs = append(errs, errors.New("max_chars must be between 10 and 200"))
	}
	return errors.Join(errs...)
}

// TokenBudgetConfig configures TokenBudgetMiddleware (opt-in).
type TokenBudgetConfig struct {
	Enabled         bool    `yaml:"enabled"`           // default false
	MaxTokens       int64   `yaml:"max_tokens"`        // default 200000
	WarnRatio       float64 `yaml:"warn_ratio"`        // default 0.8
	HardRatio       float64 `yaml:"hard_ratio"`        // default 1.0
	MaxInputTokens  int64   `yaml:"max_input_tokens"`  // 0 = no separate limit
	MaxOutputTokens int64   `yaml:"max_output_tokens"` // 0 = no separate limit
}

// DefaultTokenBudgetConfig returns DeerFlow's defaults.
func DefaultTokenBudgetConfig() TokenBudgetConfig {
	return TokenBudgetConfig{MaxTokens: 200000, WarnRatio: 0.8, HardRatio: 1.0}
}

// Validate implements the config section contract.
func (c *TokenBudgetConfig) Validate() error {
	var errs []error
	if c.MaxTokens < 1 {
		errs = append(errs, errors.New("max_tokens must be at least 1"))
	}
	if c.WarnRatio <= 0 || c.WarnRatio > c.HardRatio {
		errs = append(errs, errors.New("warn_ratio must be positive and at most hard_ratio"))
	}
	if c.MaxInputTokens < 0 || c.MaxOutputTokens < 0 {
		errs = append(errs, errors.New("max_input_tokens and max_output_tokens must not be negative"))
	}
	return errors.Join(errs...)
}

// ExtensionsConfig lists configured extension middlewares by registered name
// (DeerFlow's extensions.middlewares class paths; see RegisterExtension).
type ExtensionsConfig struct {
	Middlewares []string `yaml:"middlewares"`
}

// Validate implements the config section contract.
func (c *ExtensionsConfig) Validate() error {
	var errs []error
	for i, n := range c.Middlewares {
		if _, ok := lookupExtension(n); !ok {
			errs = append(errs, fmt.Errorf("middlewares[%d]: %q is not a registered extension middleware", i, n))
		}
	}
	return errors.Join(errs...)
}

// ReadBeforeWriteConfig is the read_before_write section.
type ReadBeforeWriteConfig struct {
	Enabled bool `yaml:"enabled"` // default true
}

// Settings mirrors DeerFlow's settings.json (the seed's skeleton) as a YAML section.
type Settings struct {
	Runtime  RuntimeSettings  `yaml:"runtime"`
	Sandbox  SandboxSettings  `yaml:"sandbox"`
	Memory   MemorySettings   `yaml:"memory"`
	Subagent SubagentSettings `yaml:"subagent"`
	PlanMode PlanModeSettings `yaml:"plan_mode"`
}

// RuntimeSettings: where thread data lives.
type RuntimeSettings struct {
	// BaseDir holds users/<user>/threads/<thread>/user-data (default: $TMPDIR/agentmeter).
	BaseDir string `yaml:"base_dir"`
	// ThreadsDir is accepted for the seed's skeleton; paths derive from base_dir.
	ThreadsDir string `yaml:"threads_dir"`
	// LazyInit computes thread paths without creating them until first use (default true).
	LazyInit bool `yaml:"lazy_init"`
}

// SandboxSettings: SandboxMiddleware.
type SandboxSettings struct {
	Provider           string `yaml:"provider"`              // "local" (default)
	LazyInit           bool   `yaml:"lazy_init"`             // default true
	ReuseWithinThread  bool   `yaml:"reuse_within_thread"`   // default true
	ShutdownOnAppClose bool   `yaml:"shutdown_on_app_close"` // default true
}

// MemorySettings: MemoryMiddleware and the memory block of DynamicContextMiddleware.
type MemorySettings struct {
	Enabled          bool `yaml:"enabled"`           // default true
	InjectionEnabled bool `yaml:"injection_enabled"` // default true
	QueueBatchSize   int  `yaml:"queue_batch_size"`  // default 8
	// ModelName turns on model-written memory updates (caller middleware:memory);
	// empty = memory keeps the filtered conversation without a model call.
	ModelName string `yaml:"model_name"`
}

// SubagentSettings: SubagentLimitMiddleware.
type SubagentSettings struct {
	Enabled        bool `yaml:"enabled"`           // default true
	MaxConcurrent  int  `yaml:"max_concurrent"`    // default 3, clamped to [1,4]
	MaxTotalPerRun int  `yaml:"max_total_per_run"` // default 6, clamped to [1,50]
}

// PlanModeSettings: TodoMiddleware.
type PlanModeSettings struct {
	Enabled                bool `yaml:"enabled"`                  // default false
	MaxCompletionReminders int  `yaml:"max_completion_reminders"` // default 2
}

// DefaultSettings returns the defaults.
func DefaultSettings() Settings {
	return Settings{
		Runtime:  RuntimeSettings{LazyInit: true},
		Sandbox:  SandboxSettings{Provider: "local", LazyInit: true, ReuseWithinThread: true, ShutdownOnAppClose: true},
		Memory:   MemorySettings{Enabled: true, InjectionEnabled: true, QueueBatchSize: 8},
		Subagent: SubagentSettings{Enabled: true, MaxConcurrent: 3, MaxTotalPerRun: 6},
		PlanMode: PlanModeSettings{MaxCompletionReminders: 2},
	}
}

// Validate implements the config section contract.
func (s *Settings) Validate() error {
	var errs []error
	if s.Sandbox.Provider != "local" {
		errs = append(errs, fmt.Errorf("sandbox.provider %q is not supported (local)", s.Sandbox.Provider))
	}
	if s.Memory.QueueBatchSize < 1 {
		errs = append(errs, errors.New("memory.queue_batch_size must be at least 1"))
	}
	if s.PlanMode.MaxCompletionReminders < 0 {
		errs = append(errs, errors.New("plan_mode.max_completion_reminders must not be negative"))
	}
	return errors.Join(errs...)
}

// Config is every middleware section of one config.yaml.
type Config struct {
	CircuitBreaker     CircuitBreakerConfig
	Guardrails         GuardrailsConfig
	TokenUsage         TokenUsageConfig
	LoopDetection      LoopDetectionConfig
	SafetyFinishReason SafetyFinishReasonConfig
	ToolSearch         ToolSearchConfig
	Summarization      SummarizationConfig
	Title              TitleConfig
	TokenBudget        TokenBudgetConfig
	ThreadBudget       ThreadBudgetConfig
	Extensions         ExtensionsConfig
	Settings           Settings
	ToolOutput         ToolOutputConfig
	ReadBeforeWrite    ReadBeforeWriteConfig
	ToolProgress       ToolProgressConfig
}

// DefaultConfig is the configuration of a config.yaml without middleware sections.
func DefaultConfig() Config {
	var out Config
	for _, s := range sections {
		s.setDefault(&out)
	}
	return out
}

// ConfigFrom extracts the middleware sections of a loaded config (defaults for absent ones).
func ConfigFrom(c *config.Config) Config {
	out := DefaultConfig()
	if c == nil {
		return out
	}
	for _, s := range sections {
		s.copyFrom(c, &out)
	}
	return out
}
