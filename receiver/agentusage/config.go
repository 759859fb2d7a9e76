package agentusage

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
)

// Config is the agentusage receiver's configuration.
type Config struct {
	// ServerConfig is the HTTP server (endpoint, TLS, max_request_body_size, …).
	// Default endpoint: localhost:4319, loopback only. Bodies over
	// max_request_body_size (default 20 MiB) are answered 413.
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// APIKeys, when not empty, are the keys a client must present, as `x-api-key`,
	// `Authorization: Bearer <key>`, or HTTP Basic (Langfuse: a key matches the
	// password or "public:secret"). Default: none (no authentication; the default
	// endpoint is loopback only). GET /info and GET /api/public/health stay open, as at
	// the vendors.
	APIKeys []configopaque.String `mapstructure:"api_keys"`
	// PendingTimeout is how long a LangSmith run POSTed without end_time (or a Langfuse
	// observation created without endTime) waits for its PATCH/update before it is
	// emitted as it is. Default: 5m.
	PendingTimeout time.Duration `mapstructure:"pending_timeout"`
	// MaxPending bounds how many unfinished runs/observations are held per face; when
	// full, the oldest is emitted early, with the request that needs its room.
	// Default: 10000.
	MaxPending int `mapstructure:"max_pending"`
	// RetryAfter is the Retry-After the receiver sends with 429/503 when the pipeline
	// refuses data. Default: 1s.
	RetryAfter time.Duration `mapstructure:"retry_after"`
	// Storage names a storage extension (file_storage) that keeps the runs and
	// observations held for their PATCH/update on disk, written before the SDK's request
	// is answered, so a restart after a crash holds them again. Unset: memory only.
	Storage *component.ID `mapstructure:"storage"`
}

// Validate collects every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.ServerConfig.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint must not be empty"))
	}
	for i, k := range c.APIKeys {
		if k == "" {
			errs = append(errs, fmt.Errorf("api_keys[%d] must not be empty", i))
		}
	}
	if c.PendingTimeout <= 0 {
		errs = append(errs, errors.New("pending_timeout must be positive"))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, errors.New("max_pending must be positive"))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, errors.New("retry_after must not be negative"))
	}
	if c.ServerConfig.MaxRequestBodySize < 0 {
		errs = append(errs, errors.New("max_request_body_size must not be negative"))
	}
	return errors.Join(errs...)
}
