package tokenmetrics

import (
	"errors"
	"fmt"
	"time"
)

// Limits that keep a typo from configuring something that cannot work: a table that
// outgrows any container, metrics that reach Prometheus minutes late.
const (
	maxMaxSeries       = 1_000_000
	maxFlushInterval   = time.Minute
	maxRememberedCalls = 10_000_000
)

// Config is the tokenmetrics connector's configuration.
type Config struct {
	// Metrics chooses which metric sets are emitted. At least one must be on.
	Metrics MetricSets `mapstructure:"metrics"`

	// MaxSeries is the most label sets each metric set keeps (one label set is one series
	// per token type, or one histogram). A model call with a new label set past it is
	// counted in that set's overflow series (label otel.metric.overflow="true"), so totals
	// stay right while the label detail is lost; the connector logs it once and counts it
	// in its own telemetry.
	// Default: 10000.
	MaxSeries int `mapstructure:"max_series"`

	// FlushInterval is how often the series changed since the last flush are emitted. The
	// metrics' cost is then paid once per interval instead of once per trace (the merge
	// releases traces one at a time); 0 emits after every batch of spans.
	// Default: 1s.
	FlushInterval time.Duration `mapstructure:"flush_interval"`

	// ResourceAttributes are the resource attributes copied onto the metrics' resource;
	// every other resource attribute of the agent is dropped, so nothing else becomes a
	// label or a target_info entry. The prometheus exporter turns service.name into job.
	// Default: [service.name].
	ResourceAttributes []string `mapstructure:"resource_attributes"`

	// RememberedCalls is how many of the calls counted last are remembered at least (by
	// trace and span id; up to twice as many: 16 MiB at the default), so that the same
	// call handed over again is not counted twice: a request another consumer of the
	// batch refused (an exporter's full sending queue) comes again from its sender's
	// retry, and this connector had counted it already. 0 remembers none.
	// Default: 500000.
	RememberedCalls int `mapstructure:"remembered_calls"`
}

// MetricSets turns each metric set on or off.
type MetricSets struct {
	// Agentmeter is agentmeter.tokens (Prometheus agentmeter_tokens_total), labelled by
	// token_type, caller, agent, model and provider.
	// Default: true.
	Agentmeter bool `mapstructure:"agentmeter"`
	// GenAIInference is the current GenAI semantic conventions: the counters
	// gen_ai.client.inference.usage.* and the histograms
	// gen_ai.client.inference.operation.{input,output}_tokens.
	// Default: true.
	GenAIInference bool `mapstructure:"gen_ai_inference"`
	// GenAITokenUsage is the gen_ai.client.token.usage histogram that earlier semantic
	// conventions defined, for dashboards built on it. Deprecated: on by default for
	// this release, off in the next, then removed.
	// Default: true.
	GenAITokenUsage bool `mapstructure:"gen_ai_token_usage"`
}

func createDefaultConfig() *Config {
	return &Config{
		Metrics:            MetricSets{Agentmeter: true, GenAIInference: true, GenAITokenUsage: true},
		MaxSeries:          10_000,
		FlushInterval:      time.Second,
		ResourceAttributes: []string{"service.name"},
		RememberedCalls:    500_000,
	}
}

// Validate reports every problem at once, each naming its YAML key.
func (c *Config) Validate() error {
	var errs []error
	if !c.Metrics.Agentmeter && !c.Metrics.GenAIInference && !c.Metrics.GenAITokenUsage {
		errs = append(errs, errors.New("metrics: every metric set is off (agentmeter, gen_ai_inference, gen_ai_token_usage); turn at least one on"))
	}
	if c.MaxSeries <= 0 {
		errs = append(errs, fmt.Errorf("max_series must be positive, got %d", c.MaxSeries))
	} else if c.MaxSeries > maxMaxSeries {
		errs = append(errs, fmt.Errorf("max_series must be at most %d, got %d", maxMaxSeries, c.MaxSeries))
	}
	if c.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("flush_interval must not be negative, got %s", c.FlushInterval))
	} else if c.FlushInterval > maxFlushInterval {
		errs = append(errs, fmt.Errorf("flush_interval must be at most %s, got %s", maxFlushInterval, c.FlushInterval))
	}
	if c.RememberedCalls < 0 || c.RememberedCalls > maxRememberedCalls {
		errs = append(errs, fmt.Errorf("remembered_calls must be between 0 and %d, got %d", maxRememberedCalls, c.RememberedCalls))
	}
	seen := make(map[string]bool, len(c.ResourceAttributes))
	for i, k := range c.ResourceAttributes {
		switch {
		case k == "":
			errs = append(errs, fmt.Errorf("resource_attributes[%d] is empty", i))
		case seen[k]:
			errs = append(errs, fmt.Errorf("resource_attributes[%d]: %q is listed twice", i, k))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}
