// Package configtest holds the config checks every collector component's tests make:
// each section of testdata/config.yaml loads as the collector loads it, and a bad value
// is refused with an error that names the key at fault.
package configtest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// load reads id's section of the package's testdata/config.yaml the way the collector
// does at start: unmarshalled over the factory's default config, then validated.
func load(t *testing.T, f component.Factory, id component.ID) component.Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := f.CreateDefaultConfig()
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	return cfg
}

// Section is one entry of testdata/config.yaml and the config it must load as.
type Section struct {
	ID   component.ID
	Want component.Config
}

// Loads checks, in a subtest per section, that each one loads (Load) as its Want.
func Loads(t *testing.T, f component.Factory, sections []Section) {
	t.Helper()
	for _, s := range sections {
		t.Run(s.ID.String(), func(t *testing.T) {
			assert.Equal(t, s.Want, load(t, f, s.ID))
		})
	}
}

// Bad is one change to a valid config and the texts its validation error must hold.
type Bad[C any] struct {
	name string
	mod  func(C)
	want []string
}

// BadCase names a change to a valid config and the texts the error refusing it must hold.
func BadCase[C any](name string, mod func(C), want ...string) Bad[C] {
	return Bad[C]{name: name, mod: mod, want: want}
}

// Refuses checks, in a subtest per case, that Validate refuses a fresh config from
// newConfig once the case has changed it, with an error holding every wanted text.
func Refuses[C interface{ Validate() error }](t *testing.T, newConfig func() C, cases ...Bad[C]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := newConfig()
			c.mod(cfg)
			ErrorHas(t, cfg.Validate(), c.want...)
		})
	}
}

// ErrorHas fails unless err is an error whose text holds every one of parts.
func ErrorHas(t *testing.T, err error, parts ...string) {
	t.Helper()
	require.Error(t, err)
	for _, p := range parts {
		assert.Contains(t, err.Error(), p)
	}
}
