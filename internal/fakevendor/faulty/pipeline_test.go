package faulty

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.yaml.in/yaml/v3"
)

func TestPipelineYAML(t *testing.T) {
	p := Pipeline{
		OTLPAddr: "127.0.0.1:4318", TelemetryPort: 8888, StorageDir: "/tmp/q",
		LangfuseURL: "http://lf", LangfusePublic: "pk", LangfuseSecret: "sk",
		LangSmithURL: "http://ls", LangSmithKey: "key", LimitMiB: 128, SubagentMerge: "{num_traces: 4}",
		ExtraExporters: map[string]string{"file": "{path: out.jsonl}"},
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(p.YAML()), &doc); err != nil {
		t.Fatalf("invalid YAML: %v\n%s", err, p.YAML())
	}
	svc := doc["service"].(map[string]any)
	pipe := svc["pipelines"].(map[string]any)["traces"].(map[string]any)
	assert.Equal(t, []any{"memory_limiter", "subagentmerge"}, pipe["processors"])
	assert.ElementsMatch(t, []any{"langfuse", "langsmith", "file"}, pipe["exporters"])
	assert.Equal(t, []any{"file_storage"}, svc["extensions"])
	exp := doc["exporters"].(map[string]any)
	lf := exp["langfuse"].(map[string]any)
	assert.Equal(t, "file_storage", lf["sending_queue"].(map[string]any)["storage"])
	assert.Equal(t, "0s", lf["retry_on_failure"].(map[string]any)["max_elapsed_time"], "retries forever by default")
	ml := doc["processors"].(map[string]any)["memory_limiter"].(map[string]any)
	assert.Equal(t, 128, ml["limit_mib"])
	assert.Equal(t, 32, ml["spike_limit_mib"])

	bare := Pipeline{OTLPAddr: "127.0.0.1:1", LangfuseURL: "http://lf", MaxElapsed: "2s"}
	doc = nil
	if err := yaml.Unmarshal([]byte(bare.YAML()), &doc); err != nil {
		t.Fatal(err)
	}
	assert.NotContains(t, doc, "extensions")
	lf = doc["exporters"].(map[string]any)["langfuse"].(map[string]any)
	assert.NotContains(t, lf["sending_queue"], "storage")
	assert.Equal(t, "2s", lf["retry_on_failure"].(map[string]any)["max_elapsed_time"])
	assert.NotContains(t, doc["exporters"], "langsmith")
}
