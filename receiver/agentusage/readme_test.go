package agentusage

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/readmetest"
)

// README.md's configuration table gives the defaults the code has.
func TestREADMEDefaults(t *testing.T) {
	readmetest.Defaults(t, "README.md", func() component.Config { return createDefaultConfig() }, 5)
}
