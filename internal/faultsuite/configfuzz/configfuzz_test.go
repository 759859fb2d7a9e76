package configfuzz

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
)

type cfg struct {
	Key   string `mapstructure:"key"`
	Limit int    `mapstructure:"limit"`
}

func (c *cfg) Validate() error {
	if c.Limit < 0 {
		return errors.New("limit must not be negative")
	}
	return nil
}

type factory struct{}

func (factory) CreateDefaultConfig() component.Config { return &cfg{} }

func TestCheck(t *testing.T) {
	secrets := func(c component.Config) []string { return []string{c.(*cfg).Key} }
	ok := func(y string) bool { _, accepted := Check(t, factory{}, []byte(y), secrets); return accepted }
	c, accepted := Check(t, factory{}, []byte("key: abcdefghij\nlimit: 3\n"), secrets)
	assert.True(t, accepted)
	assert.Equal(t, &cfg{Key: "abcdefghij", Limit: 3}, c)
	assert.False(t, ok("limit: -1\n"), "Validate runs")
	assert.False(t, ok("limit: [1\n"), "bad YAML")
	assert.False(t, ok("unknown: 1\n"), "unknown keys are refused")
	assert.False(t, ok("limit: many\n"), "wrong type")
}
