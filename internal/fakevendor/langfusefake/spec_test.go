package langfusefake

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func loadSpec(t *testing.T) *Spec {
	t.Helper()
	s, err := LoadSpec()
	require.NoError(t, err)
	return s
}

func TestProjectsBodyMatchesSpec(t *testing.T) {
	s := loadSpec(t)
	schema, ok := s.ResponseSchema(ProjectsPath, "get", "200")
	require.True(t, ok)
	assert.Empty(t, s.ValidateJSON(schema, []byte(ProjectsBody(true))))
	assert.Empty(t, s.ValidateJSON(schema, []byte(ProjectsBody(false))))
	// the validator does reject what the spec forbids
	assert.NotEmpty(t, s.ValidateJSON(schema, []byte(`{"data":[{"id":"p","name":"n"}]}`)), "organization and metadata are required")
	assert.NotEmpty(t, s.ValidateJSON(schema, []byte(`{"projects":[]}`)))
	assert.NotEmpty(t, s.ValidateJSON(schema, []byte(`{"data":[{"id":1,"name":"n","organization":{"id":"o","name":"o"},"metadata":{}}]}`)))
}

func TestOtelResponseAndUsageSchemas(t *testing.T) {
	s := loadSpec(t)
	resp, ok := s.ResponseSchema(TracesPath, "post", "200")
	require.True(t, ok)
	assert.Empty(t, s.ValidateJSON(resp, []byte(`{}`)))

	usage, ok := s.Schema("UsageDetails")
	require.True(t, ok)
	assert.Empty(t, s.ValidateJSON(usage, []byte(`{"input":1,"input_cached_tokens":2,"output":3,"total":6}`)))
	assert.NotEmpty(t, s.ValidateJSON(usage, []byte(`{"input":1.5}`)))
	assert.NotEmpty(t, s.ValidateJSON(usage, []byte(`{"input":"many"}`)))
	assert.NotEmpty(t, s.ValidateJSON(usage, []byte(`[1,2]`)))
}

func TestOtelRequestSchema(t *testing.T) {
	s := loadSpec(t)
	schema, ok := s.RequestSchema(TracesPath, "post")
	require.True(t, ok)
	td, _, _ := AgentTrace(DefaultAgentRun())
	js, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	require.NoError(t, err)
	assert.Empty(t, s.ValidateJSON(schema, js))
	// attributes sent as an object (Langfuse answers 400) fail validation
	assert.NotEmpty(t, s.ValidateJSON(schema, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":{"a":"b"}}]}]}]}`)))
	assert.NotEmpty(t, s.ValidateJSON(schema, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"CLIENT"}]}]}]}`)))
}
