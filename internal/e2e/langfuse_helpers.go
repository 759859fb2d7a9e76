//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// LangfuseEnv clears DeerFlow's Langfuse variables for the collector child process (it
// inherits the test's environment), then sets the given ones.
func LangfuseEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, k := range []string{"LANGFUSE_TRACING", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL"} {
		t.Setenv(k, "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// LangfuseCollectorConfig is an OTLP/HTTP receiver on otlpAddr feeding the langfuse
// exporter, whose settings are the YAML lines in exporterYAML (indented by the caller
// at four spaces). extensions is an optional block under `extensions:` with its ids.
func LangfuseCollectorConfig(otlpAddr, exporterYAML, extensionsYAML string, extensionIDs ...string) string {
	ext := ""
	svcExt := ""
	if extensionsYAML != "" {
		ext = "extensions:\n" + extensionsYAML
		svcExt = "  extensions: [" + strings.Join(extensionIDs, ", ") + "]\n"
	}
	return fmt.Sprintf(`%s
receivers:
  otlp:
    protocols:
      http: {endpoint: %q}
exporters:
  langfuse:
%s
service:
%s  telemetry: {metrics: {level: none}, logs: {level: info}}
  pipelines:
    traces: {receivers: [otlp], exporters: [langfuse]}
`, ext, otlpAddr, exporterYAML, svcExt)
}
