// Package vendorconfig holds the configuration rules the two vendor exporters (langfuse,
// langsmith) share: when an exporter is on (Switch), and what a sending_queue written for
// the stock exporters means (Queue).
package vendorconfig

import (
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/confmap"

	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// keyEnabled is the YAML key that says outright whether an exporter is on.
const keyEnabled = "enabled"

// Switch is DeerFlow's rule for turning a vendor exporter on (docs/contract.md#exporters),
// written once: an explicit `enabled` in the YAML wins; otherwise an explicit enabling
// variable wins (the first non-empty of vars, on when 1/true/yes/on); otherwise a key
// written into the YAML (an api key) is an intent to export and turns it on.
type Switch struct {
	vars []string // enabling variables, in priority order
	keys []string // YAML keys whose presence turns the exporter on
	env  string   // the first non-empty of vars when the config was created
	// yaml says why the YAML decided ("" when it did not)
	yaml string
}

// NewSwitch reads the enabling variables vars (in priority order) from env; keys are the
// YAML keys that turn the exporter on when nothing else decides. On is the default
// before the YAML is read.
func NewSwitch(env envconfig.Lookup, vars, keys []string) (s Switch, on bool) {
	s = Switch{vars: vars, keys: keys, env: env.First(vars...)}
	return s, envconfig.Truthy(s.env)
}

// Settle applies the rule once the YAML conf was unmarshalled into the config whose
// Enabled field is enabled.
func (s *Switch) Settle(conf *confmap.Conf, enabled *bool) {
	if conf.IsSet(keyEnabled) {
		s.yaml = fmt.Sprintf("enabled: %t in the configuration", *enabled)
		return
	}
	if s.env != "" {
		return
	}
	for _, k := range s.keys {
		if conf.IsSet(k) {
			*enabled = true
			s.yaml = strings.Join(s.keys, "/") + " set in the configuration"
			return
		}
	}
}

// Reason says why the exporter is on or off, for the one line a disabled exporter logs.
func (s *Switch) Reason() string {
	switch {
	case s.yaml != "":
		return s.yaml
	case s.env != "":
		return s.varsText() + " is " + strconv.Quote(s.env)
	}
	return "no enabled: true, no " + strings.Join(s.keys, "/") + " in the configuration, and " + s.varsText() + " is not set"
}

// varsText names the variables: "A" or "A (or B, C)".
func (s *Switch) varsText() string {
	if len(s.vars) == 1 {
		return s.vars[0]
	}
	return s.vars[0] + " (or " + strings.Join(s.vars[1:], ", ") + ")"
}
