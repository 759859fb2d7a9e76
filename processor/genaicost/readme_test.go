package genaicost

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/readmetest"
)

// The README's configuration table states the real defaults.
func TestREADMEDefaults(t *testing.T) {
	readmetest.Defaults(t, "README.md", func() component.Config { return createDefaultConfig() }, 3)
}
