//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// LangSmithCollectorConfig is an OTLP/HTTP → subagentmerge → batch → langsmith pipeline.
// exporterYAML is the langsmith exporter's body (indented by the caller's 6 spaces);
// extensionsYAML, when set, is the extensions section body and every extension listed
// in service.extensions.
func LangSmithCollectorConfig(otlpAddr, exporterYAML, extensionsYAML string, extensionIDs ...string) string {
	ext, svcExt := "", ""
	if extensionsYAML != "" {
		ext = "extensions:\n" + extensionsYAML + "\n"
		svcExt = fmt.Sprintf("  extensions: [%s]\n", strings.Join(extensionIDs, ", "))
	}
	return fmt.Sprintf(`%sreceivers:
  otlp:
    protocols:
      http: {endpoint: %q}
processors:
  subagentmerge: {wait_duration: 300ms}
  batch: {timeout: 100ms}
exporters:
  langsmith:
%s
service:
%s  telemetry: {metrics: {level: none}, logs: {level: info}}
  pipelines:
    traces: {receivers: [otlp], processors: [subagentmerge, batch], exporters: [langsmith]}
`, ext, otlpAddr, exporterYAML, svcExt)
}

// clearLangSmithEnv makes the collector process see only the variables a test sets.
func clearLangSmithEnv(t *testing.T) {
	for _, v := range []string{"LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING", "LANGSMITH_API_KEY",
		"LANGCHAIN_API_KEY", "LANGSMITH_PROJECT", "LANGCHAIN_PROJECT", "LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT"} {
		t.Setenv(v, "")
	}
}

// mergeWritten are the attributes subagentmerge writes (docs/contract.md#merge).
var mergeWritten = map[string]bool{
	genai.AttrSubagentInput: true, genai.AttrSubagentOutput: true, genai.AttrSubagentTotal: true,
	genai.AttrSubagentCacheRead: true, genai.AttrSubagentCacheCreat: true, genai.AttrSubagentReasoning: true,
	genai.AttrSubagentDispatches: true, genai.AttrSubagentToolCallIDs: true, genai.AttrMergeStatus: true,
}

// StripMergedUsage removes what subagentmerge writes, so the collector's own processor
// does the merge.
func StripMergedUsage(td ptrace.Traces) {
	for sp := range spaniter.All(td) {
		sp.Attributes().RemoveIf(func(key string, _ pcommon.Value) bool { return mergeWritten[key] })
	}
}

func mkdir(path string) error { return os.MkdirAll(path, 0o700) }
