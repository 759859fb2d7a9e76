package langsmith

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A held run written to storage reads back as the same run: every field, the raw
// objects byte for byte.
func TestStoredRunRoundTrips(t *testing.T) {
	ops, errs, err := DecodeBatch([]byte(`{"post":[{"id":"` + llmID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `",
	  "dotted_order":"20260101T000000000001Z` + traceID + `.20260101T000000100000Z` + llmID + `","name":"ChatOpenAI","run_type":"llm",
	  "session_name":"p","start_time":"2026-01-01T00:00:00.1Z","error":"x","tags":["lead_agent"],
	  "inputs":{"messages":[]},"outputs":{"usage_metadata":{"input_tokens":3,"output_tokens":1}},"extra":{"metadata":{"ls_model_name":"m"}}}]}`))
	require.NoError(t, err)
	require.Empty(t, errs)
	r := ops[0].Run
	b, err := EncodeRun(r)
	require.NoError(t, err)
	back, err := DecodeStoredRun(b)
	require.NoError(t, err)
	assert.Equal(t, r.detach(), back)

	// a multipart inputs part that is not an object is stored as none
	r.inputs = []byte("not json")
	b, err = EncodeRun(r)
	require.NoError(t, err)
	back, err = DecodeStoredRun(b)
	require.NoError(t, err)
	assert.Nil(t, back.inputs)
}
