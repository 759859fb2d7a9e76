package langsmith

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorconfig"
	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// DeerFlow's environment variables, in priority order (docs/contract.md#exporters).
var (
	envEnabled  = []string{"LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"}
	envAPIKey   = []string{"LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"}
	envProject  = []string{"LANGSMITH_PROJECT", "LANGCHAIN_PROJECT"}
	envEndpoint = []string{"LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT"}
)

// Defaults.
const (
	DefaultEndpoint       = "https://api.smith.langchain.com"
	DefaultProject        = "deer-flow"
	DefaultTimeout        = 30 * time.Second
	DefaultMaxCachedSpans = 100_000
)

// ErrMissingAPIKey is DeerFlow's exact fail-fast message (docs/contract.md#exporters).
//
//lint:ignore ST1005 DeerFlow's message, word for word
var ErrMissingAPIKey = errors.New("LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set.")

// Config is the langsmith exporter's configuration. Every field defaults from DeerFlow's
// environment variables when they are set; explicit YAML wins.
type Config struct {
	// ClientConfig holds the HTTP client settings. endpoint is the API base URL
	// (default LANGSMITH_ENDPOINT, LANGCHAIN_ENDPOINT, then https://api.smith.langchain.com;
	// self-hosted: https://<host>/api/v1). timeout defaults to 30s. compression applies to
	// multipart bodies: zstd (default, what the SDKs send), gzip or none.
	ClientConfig confighttp.ClientConfig `mapstructure:",squash"`
	// QueueConfig is sending_queue (exporterhelper; default on, in memory, bounded in
	// bytes: 8 MiB of encoded spans, sizer bytes; a queue_size written without a sizer
	// counts requests, as for the stock exporters). A full queue makes the caller wait at
	// most 2 s for room, then refuses it retryably. Set storage to a storage extension id
	// for a persistent queue.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is the retry policy for retryable answers (408, 425, 429, 5xx, network).
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// APIKey is sent as x-api-key (default LANGSMITH_API_KEY, then LANGCHAIN_API_KEY).
	APIKey configopaque.String `mapstructure:"api_key"`
	// Project is the LangSmith project (session_name) runs go to (default
	// LANGSMITH_PROJECT, LANGCHAIN_PROJECT, then "deer-flow").
	Project string `mapstructure:"project"`
	// TenantID is sent as X-Tenant-Id, for keys that span several workspaces (default empty).
	TenantID string `mapstructure:"tenant_id"`
	// Enabled turns the exporter on. Default: the first non-empty of LANGSMITH_TRACING,
	// LANGCHAIN_TRACING_V2, LANGCHAIN_TRACING is 1/true/yes/on. When neither YAML nor
	// those variables say anything and the YAML sets api_key, the exporter is enabled: a
	// key written into the collector config is an intent to export. When false the
	// exporter accepts and drops spans and says so once at start.
	Enabled bool `mapstructure:"enabled"`
	// CheckCredentials makes start call GET /sessions?limit=1 and fail on 401/403
	// (default false). Network errors only log a warning.
	CheckCredentials bool `mapstructure:"check_credentials"`
	// MaxCachedSpans bounds how many spans' ancestor chains are remembered between batches
	// so late children get the right dotted_order (default 100000; 0 = none).
	MaxCachedSpans int `mapstructure:"max_cached_spans"`

	// enabled settles Enabled from the YAML and DeerFlow's variables
	enabled vendorconfig.Switch
}

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

func newDefaultConfig(env envconfig.Lookup) *Config {
	client := confighttp.NewDefaultClientConfig()
	client.Endpoint = env.FirstOr(DefaultEndpoint, envEndpoint...)
	client.Timeout = DefaultTimeout
	client.Compression = configcompression.TypeZstd
	vendorhttp.KeepIdleConnections(&client)
	sw, on := vendorconfig.NewSwitch(env, envEnabled, []string{"api_key"})
	return &Config{
		ClientConfig:   client,
		QueueConfig:    configoptional.Some(vendorhttp.DefaultQueueConfig()),
		RetryConfig:    configretry.NewDefaultBackOffConfig(),
		APIKey:         configopaque.String(env.First(envAPIKey...)),
		Project:        env.FirstOr(DefaultProject, envProject...),
		Enabled:        on,
		MaxCachedSpans: DefaultMaxCachedSpans,
		enabled:        sw,
	}
}

// Unmarshal applies the YAML over the environment defaults, then settles enabled
// (vendorconfig.Switch: an explicit `enabled` wins, then an explicit LANGSMITH_TRACING or
// its fallbacks, then an api_key given in the YAML turns the exporter on, as for
// Langfuse) and what sending_queue's queue_size counts (vendorconfig.Queue).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if err := conf.Unmarshal(cfg); err != nil {
		return err
	}
	cfg.enabled.Settle(conf, &cfg.Enabled)
	vendorconfig.Queue(conf, &cfg.QueueConfig)
	return nil
}

// disabledReason says why a disabled exporter is off, for its one log line at start.
func (cfg *Config) disabledReason() string { return cfg.enabled.Reason() }

// Validate collects every problem. A disabled exporter is not validated beyond its
// numbers, as DeerFlow never validates a disabled provider.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.MaxCachedSpans < 0 {
		errs = append(errs, errors.New("max_cached_spans must not be negative"))
	}
	if !cfg.Enabled {
		return errors.Join(errs...)
	}
	if cfg.APIKey == "" {
		errs = append(errs, ErrMissingAPIKey)
	}
	if err := vendorhttp.ValidateEndpoint(cfg.ClientConfig.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if cfg.Project == "" {
		errs = append(errs, errors.New("project must not be empty"))
	}
	if cfg.ClientConfig.Timeout < 0 {
		errs = append(errs, errors.New("timeout must not be negative"))
	}
	if _, err := bodyCompression(cfg.ClientConfig.Compression); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// bodyCompression maps the compression setting to what the ingest client supports.
func bodyCompression(t configcompression.Type) (string, error) {
	switch t {
	case "", "none":
		return "", nil
	case configcompression.TypeGzip:
		return "gzip", nil
	case configcompression.TypeZstd:
		return "zstd", nil
	}
	return "", fmt.Errorf("compression must be zstd, gzip or none, got %q", string(t))
}
