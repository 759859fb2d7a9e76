// Package configfuzz is the shared body of the components' config fuzz targets
// (fuzz_test.go beside each component): YAML goes through confmap exactly as the
// collector loads it, into the component's default config, then Validate. Nothing may
// panic, and neither an unmarshal nor a validation error may quote a configured secret.
package configfuzz

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
)

// Factory is the part of a component factory the check needs.
type Factory interface {
	CreateDefaultConfig() component.Config
}

// Check loads yamlBody as the component's config section. secrets returns the secret
// values the decoded config holds (keys, passwords); they must not appear in any error.
// It returns the decoded config and whether it was accepted (unmarshal and Validate
// both passed), so a target can check invariants of accepted configs.
func Check(t *testing.T, f Factory, yamlBody []byte, secrets func(component.Config) []string) (component.Config, bool) {
	t.Helper()
	retrieved, err := confmap.NewRetrievedFromYAML(yamlBody)
	if err != nil {
		return nil, false
	}
	conf, err := retrieved.AsConf()
	if err != nil || conf == nil {
		return nil, false
	}
	cfg := f.CreateDefaultConfig()
	err = conf.Unmarshal(cfg)
	if err == nil {
		if v, ok := cfg.(interface{ Validate() error }); ok {
			err = v.Validate()
		}
	}
	if err != nil && secrets != nil {
		msg := err.Error()
		for _, s := range secrets(cfg) {
			// short values (a letter) occur in any message by chance
			if len(s) >= 8 && strings.Contains(msg, s) {
				t.Fatalf("the config error quotes a secret (%d chars): %s", len(s), redact(msg, s))
			}
		}
	}
	return cfg, err == nil
}

func redact(msg, secret string) string {
	return strings.ReplaceAll(msg, secret, fmt.Sprintf("<secret %d chars>", len(secret)))
}
