package langfuse

import (
	"errors"
	"fmt"
	"strings"

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

// DeerFlow's environment variables (docs/contract.md#exporters).
const (
	EnvTracing   = "LANGFUSE_TRACING"
	EnvPublicKey = "LANGFUSE_PUBLIC_KEY"
	EnvSecretKey = "LANGFUSE_SECRET_KEY"
	EnvBaseURL   = "LANGFUSE_BASE_URL"

	// DefaultEndpoint is Langfuse Cloud EU, DeerFlow's and the SDKs' default host.
	DefaultEndpoint = "https://cloud.langfuse.com"
)

// missingSettingsMessage is DeerFlow's fail-fast sentence (docs/contract.md#exporters), followed by the
// missing variable names in the order public key, secret key.
const missingSettingsMessage = "Langfuse tracing is enabled but required settings are missing: "

// Config is the langfuse exporter's configuration. Every default that DeerFlow reads
// from the environment is read from the same variable when the config is created, so
// explicit YAML values override the environment.
type Config struct {
	// ClientConfig holds endpoint (the Langfuse base URL; default $LANGFUSE_BASE_URL, else
	// https://cloud.langfuse.com), timeout (default 30s), compression (gzip, the default,
	// or none: Langfuse takes no other encoding) with compression_params.level, TLS, proxy
	// and the other HTTP client settings.
	confighttp.ClientConfig `mapstructure:",squash"`

	// PublicKey is the project's public key (pk-lf-…), the Basic-auth user.
	// Default: $LANGFUSE_PUBLIC_KEY.
	PublicKey configopaque.String `mapstructure:"public_key"`
	// SecretKey is the project's secret key (sk-lf-…), the Basic-auth password.
	// Default: $LANGFUSE_SECRET_KEY.
	SecretKey configopaque.String `mapstructure:"secret_key"`

	// Enabled turns the exporter on. Default: $LANGFUSE_TRACING is 1, true, yes or on.
	// When neither YAML nor LANGFUSE_TRACING says anything and the YAML sets public_key
	// or secret_key, the exporter is enabled: keys written into the collector config are
	// an intent to export. A disabled exporter accepts and drops spans.
	Enabled bool `mapstructure:"enabled"`

	// CheckCredentials makes start call GET /api/public/projects once; rejected keys
	// (401/403) stop the collector from starting, an unreachable Langfuse does not.
	// Default: false (DeerFlow does not check; the call counts against a 30/min limit).
	CheckCredentials bool `mapstructure:"check_credentials"`

	// QueueConfig is sending_queue (exporterhelper; default on, in memory, bounded in
	// bytes: 8 MiB of encoded spans, sizer bytes; a queue_size written without a sizer
	// counts requests, as for the stock exporters). A full queue makes the caller wait at
	// most 2 s for room, then refuses it retryably. Set storage to a storage extension id
	// for a persistent queue.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is retry_on_failure (default on: 5s initial, 30s max interval, 5m total).
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// enabled settles Enabled from the YAML and LANGFUSE_TRACING
	enabled vendorconfig.Switch
}

var (
	_ confmap.Unmarshaler = (*Config)(nil)
	_ confmap.Validator   = (*Config)(nil)
)

// newConfig builds the default configuration from the given environment.
func newConfig(env envconfig.Lookup) *Config {
	client := confighttp.NewDefaultClientConfig()
	client.Endpoint = env.FirstOr(DefaultEndpoint, EnvBaseURL)
	client.Timeout = defaultTimeout
	client.Compression = configcompression.TypeGzip
	client.WriteBufferSize = 512 * 1024
	vendorhttp.KeepIdleConnections(&client)

	sw, on := vendorconfig.NewSwitch(env, []string{EnvTracing}, []string{"public_key", "secret_key"})
	return &Config{
		ClientConfig: client,
		PublicKey:    configopaque.String(env.First(EnvPublicKey)),
		SecretKey:    configopaque.String(env.First(EnvSecretKey)),
		Enabled:      on,
		QueueConfig:  configoptional.Some(vendorhttp.DefaultQueueConfig()),
		RetryConfig:  configretry.NewDefaultBackOffConfig(),
		enabled:      sw,
	}
}

// Unmarshal applies the YAML over the environment defaults, then settles enabled
// (vendorconfig.Switch: an explicit `enabled` wins, then an explicit LANGFUSE_TRACING,
// then keys given in the YAML turn the exporter on) and what sending_queue's queue_size
// counts (vendorconfig.Queue).
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if err := conf.Unmarshal(c); err != nil {
		return err
	}
	c.enabled.Settle(conf, &c.Enabled)
	vendorconfig.Queue(conf, &c.QueueConfig)
	return nil
}

// disabledReason says why a disabled exporter is off, for its one log line at start.
func (c *Config) disabledReason() string { return c.enabled.Reason() }

// Validate fails fast when the exporter is enabled but cannot send: DeerFlow's message
// for missing keys (docs/contract.md#exporters), and a usable endpoint. A disabled exporter is never
// validated, as in DeerFlow.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	var missing []string
	if c.PublicKey == "" {
		missing = append(missing, EnvPublicKey)
	}
	if c.SecretKey == "" {
		missing = append(missing, EnvSecretKey)
	}
	if len(missing) > 0 {
		errs = append(errs, errors.New(missingSettingsMessage+strings.Join(missing, ", ")))
	}
	if err := validateEndpoint(c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if c.Compression.IsCompressed() && c.Compression != configcompression.TypeGzip {
		errs = append(errs, fmt.Errorf("compression must be gzip or none, not %q: Langfuse accepts only gzip request bodies", c.Compression))
	}
	return errors.Join(errs...)
}

// validateEndpoint checks the base URL; its messages never echo the URL.
func validateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("endpoint must be set (the Langfuse base URL, e.g. " + DefaultEndpoint + ")")
	}
	return vendorhttp.ValidateEndpoint(endpoint)
}

// tracesURL and projectsURL append Langfuse's paths to the base URL, which may itself
// have a path (a self-hosted Langfuse behind a prefix).
func tracesURL(endpoint string) string { return strings.TrimRight(endpoint, "/") + tracesPath }

func projectsURL(endpoint string) string { return strings.TrimRight(endpoint, "/") + projectsPath }

const (
	tracesPath   = "/api/public/otel/v1/traces"
	projectsPath = "/api/public/projects"
)
