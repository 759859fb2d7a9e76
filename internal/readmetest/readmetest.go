// Package readmetest keeps a component README's configuration table true: every default
// the table gives as a YAML literal must be what the component's default configuration
// already holds.
package readmetest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
)

var (
	keyCell = regexp.MustCompile("^`([a-z0-9_.]+)`$")
	literal = regexp.MustCompile("^`([^`]+)`")
	envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)
)

// Defaults reads the table under "## Configuration" of readme (columns: field, default,
// description). For each row whose default cell starts with a backticked YAML literal
// (not an environment variable name), it sets that field to that value on a fresh default
// configuration and checks that nothing changed. It fails when fewer than min rows were
// checked, so a reshaped table cannot pass by checking nothing.
func Defaults(t *testing.T, readme string, newDefault func() component.Config, minRows int) {
	t.Helper()
	raw, err := os.ReadFile(readme)
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "\n## Configuration")
	require.NotEqual(t, -1, start, "%s has no ## Configuration section", readme)
	section := text[start+1:]
	if end := strings.Index(section[2:], "\n## "); end >= 0 {
		section = section[:end+2]
	}
	checked := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if !strings.HasPrefix(strings.TrimSpace(line), "|") || len(cells) < 2 {
			continue
		}
		key := keyCell.FindStringSubmatch(strings.TrimSpace(cells[0]))
		val := literal.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if key == nil || val == nil || envName.MatchString(val[1]) {
			continue
		}
		var v any
		if err := yaml.Unmarshal([]byte(val[1]), &v); err != nil {
			t.Errorf("%s: default %q of %s is not YAML: %v", readme, val[1], key[1], err)
			continue
		}
		conf := map[string]any{}
		m := conf
		parts := strings.Split(key[1], ".")
		for _, p := range parts[:len(parts)-1] {
			sub := map[string]any{}
			m[p] = sub
			m = sub
		}
		m[parts[len(parts)-1]] = v
		cfg := newDefault()
		if err := confmap.NewFromStringMap(conf).Unmarshal(cfg); err != nil {
			t.Errorf("%s: setting %s: %s: %v", readme, key[1], val[1], err)
			continue
		}
		assert.Equal(t, newDefault(), cfg, "%s says %s defaults to %s; the default configuration differs", readme, key[1], val[1])
		checked++
	}
	assert.GreaterOrEqual(t, checked, minRows, "%s: only %d configuration defaults checked", readme, checked)
}
