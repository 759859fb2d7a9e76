package gateway

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Scopes an API key may carry.
const (
	ScopeThreadsRead  = "threads:read"
	ScopeThreadsWrite = "threads:write"
)

// LocalUser is the single user of a gateway without api_keys.
const LocalUser = "local"

// Defaults used when a Config field is zero.
const (
	DefaultListen           = "127.0.0.1:8001"
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxPromptChars   = 100_000
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultProgressInterval = 5 * time.Second
	DefaultMaxUploadBytes   = 10 << 20
	DefaultLeaseTimeout     = 30 * time.Second
	DefaultPollInterval     = 250 * time.Millisecond
	// MinLeaseTimeout keeps the renewal (a third of the lease) well above a store
	// round trip.
	MinLeaseTimeout = time.Second
)

// Multitask strategies: what a run posted on a thread that already has one does
// (LangGraph's multitask_strategy).
const (
	// MultitaskReject answers 409 while the thread has a run pending or running (the default).
	MultitaskReject = "reject"
	// MultitaskEnqueue queues the run (pending) and starts it when the thread's earlier
	// runs have finished, in the order they were posted.
	MultitaskEnqueue = "enqueue"
)

// Config is the `gateway:` section of config.yaml.
type Config struct {
	// Listen is host:port (default 127.0.0.1:8001). Without api_keys only a loopback
	// address is accepted.
	Listen string `yaml:"listen"`
	// APIKeys maps keys to users and scopes. The key itself never appears in the file:
	// either key_env names the environment variable holding it, or key_sha256 is its
	// hex SHA-256 digest.
	APIKeys []APIKey `yaml:"api_keys"`
	// MaxBodyBytes bounds a request body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxPromptChars bounds a run's input in characters (default 100000); longer gets 413.
	MaxPromptChars int `yaml:"max_prompt_chars"`
	// RunTimeout bounds one run (default 0: none); a run past it ends with status timeout.
	RunTimeout time.Duration `yaml:"run_timeout"`
	// ShutdownTimeout is how long running runs may finish after SIGTERM (default 30s);
	// the rest are marked interrupted.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ProgressInterval throttles progress snapshots written while a run goes (DeerFlow's
	// 5s default).
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// MaxUploadBytes bounds a multipart body (a run or upload with files; default 10 MiB);
	// larger gets 413. JSON bodies stay under max_body_bytes.
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// MultitaskStrategy is the default for runs that do not send one: reject (default)
	// or enqueue. A thread runs one run at a time either way.
	MultitaskStrategy string `yaml:"multitask_strategy"`
	// ThreadHistory (default true) makes a run continue its thread: the state the
	// previous run left (messages, title, todos, summary, ...) is loaded from the store
	// before the run and saved after it. false: every run starts a fresh conversation.
	ThreadHistory *bool `yaml:"thread_history"`
	// LeaseTimeout (default 30s) is how long a run stays running without its gateway
	// renewing its lease (every third of it); past it the run ends as error and its
	// thread takes its next run, on whichever gateway sharing the store is free.
	LeaseTimeout time.Duration `yaml:"lease_timeout"`
	// PollInterval (default 250ms) is how often a gateway looks in the store for runs
	// to start that another gateway admitted, and for runs others finished.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// history reports whether runs continue their thread's state.
func (c *Config) history() bool { return c.ThreadHistory == nil || *c.ThreadHistory }

// APIKey is one entry of api_keys.
type APIKey struct {
	KeyEnv    string   `yaml:"key_env"`
	KeySHA256 string   `yaml:"key_sha256"`
	UserID    string   `yaml:"user_id"`
	Scopes    []string `yaml:"scopes"`
}

// NewConfig returns the section with its defaults (config.RegisterSection's newValue).
func NewConfig() *Config {
	return &Config{Listen: DefaultListen, MaxBodyBytes: DefaultMaxBodyBytes, MaxPromptChars: DefaultMaxPromptChars,
		ShutdownTimeout: DefaultShutdownTimeout, ProgressInterval: DefaultProgressInterval, MultitaskStrategy: MultitaskReject,
		MaxUploadBytes: DefaultMaxUploadBytes, LeaseTimeout: DefaultLeaseTimeout, PollInterval: DefaultPollInterval}
}

// applyDefaults fills zero fields (a Config built in code rather than loaded).
func (c *Config) applyDefaults() {
	d := NewConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxPromptChars == 0 {
		c.MaxPromptChars = d.MaxPromptChars
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = d.ProgressInterval
	}
	if c.MultitaskStrategy == "" {
		c.MultitaskStrategy = MultitaskReject
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = d.MaxUploadBytes
	}
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = d.LeaseTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = d.PollInterval
	}
}

func validStrategy(s string) bool { return s == MultitaskReject || s == MultitaskEnqueue }

// Validate collects every problem; messages name the YAML key under gateway.
func (c *Config) Validate() error {
	var errs []error
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil || port == "" {
		errs = append(errs, fmt.Errorf("listen %q must be host:port", c.Listen))
	} else if len(c.APIKeys) == 0 && !isLoopback(host) {
		errs = append(errs, fmt.Errorf("listen %q: without api_keys the gateway serves one local user and binds loopback only (127.0.0.1, ::1 or localhost)", c.Listen))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("max_body_bytes must not be negative"))
	}
	if c.MaxUploadBytes < 0 {
		errs = append(errs, errors.New("max_upload_bytes must not be negative"))
	}
	if c.MaxPromptChars < 0 {
		errs = append(errs, errors.New("max_prompt_chars must not be negative"))
	}
	if c.RunTimeout < 0 {
		errs = append(errs, errors.New("run_timeout must not be negative"))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("shutdown_timeout must not be negative"))
	}
	if c.ProgressInterval < 0 {
		errs = append(errs, errors.New("progress_interval must not be negative"))
	}
	if c.LeaseTimeout < 0 {
		errs = append(errs, errors.New("lease_timeout must not be negative"))
	} else if c.LeaseTimeout > 0 && c.LeaseTimeout < MinLeaseTimeout {
		errs = append(errs, fmt.Errorf("lease_timeout %s is below the minimum %s (a lease is renewed every third of it)", c.LeaseTimeout, MinLeaseTimeout))
	}
	if c.PollInterval < 0 {
		errs = append(errs, errors.New("poll_interval must not be negative"))
	}
	if c.MultitaskStrategy != "" && !validStrategy(c.MultitaskStrategy) {
		errs = append(errs, fmt.Errorf("multitask_strategy %q must be reject or enqueue", c.MultitaskStrategy))
	}
	for i, k := range c.APIKeys {
		at := fmt.Sprintf("api_keys[%d]", i)
		switch {
		case k.KeyEnv == "" && k.KeySHA256 == "":
			errs = append(errs, fmt.Errorf("%s: set key_env (the variable holding the key) or key_sha256 (its hex SHA-256); the key itself never goes in the file", at))
		case k.KeyEnv != "" && k.KeySHA256 != "":
			errs = append(errs, fmt.Errorf("%s: set key_env or key_sha256, not both", at))
		case k.KeySHA256 != "":
			if b, err := hex.DecodeString(k.KeySHA256); err != nil || len(b) != 32 {
				errs = append(errs, fmt.Errorf("%s.key_sha256 must be 64 hex characters (a SHA-256 digest)", at))
			}
		}
		if strings.TrimSpace(k.UserID) == "" {
			errs = append(errs, fmt.Errorf("%s.user_id is required", at))
		}
		if len(k.Scopes) == 0 {
			errs = append(errs, fmt.Errorf("%s.scopes: at least one of threads:read, threads:write is required", at))
		}
		for _, s := range k.Scopes {
			if s != ScopeThreadsRead && s != ScopeThreadsWrite {
				errs = append(errs, fmt.Errorf("%s.scopes: unknown scope %q (threads:read, threads:write)", at, s))
			}
		}
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
