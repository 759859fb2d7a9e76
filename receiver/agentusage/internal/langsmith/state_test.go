package langsmith

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
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

// Runs an earlier version left on disk, with objects it had decoded stored as JSON
// objects ("outputs", "extra"), are held again after an upgrade and build the same span.
func TestStoredRunOfEarlierFormat(t *testing.T) {
	old := `{"id":"` + llmID + `","trace_id":"` + traceID + `","name":"ChatOpenAI","run_type":"llm",
	  "start":"2026-01-01T00:00:00Z","end":"0001-01-01T00:00:00Z","posted":true,
	  "outputs":{"usage_metadata":{"input_tokens":9,"output_tokens":2}},"raw_extra":{"metadata":{"ls_model_name":"gpt-old"}}}`
	r, err := DecodeStoredRun([]byte(old))
	require.NoError(t, err)
	tr := NewTranslator(time.Minute, 10)
	tr.Repark([]Run{r}, t0)
	op, err := DecodeRun([]byte(`{"end_time":"2026-01-01T00:00:01Z"}`), true, llmID)
	require.NoError(t, err)
	spans := spansOf(tr.Plan([]Op{op}).Build())
	require.Len(t, spans, 1)
	assert.Equal(t, "chat gpt-old", spans[0].Name())
	u, _ := genai.UsageFromMap(spans[0].Attributes())
	assert.Equal(t, genai.Usage{Input: 9, Output: 2}, u)
}
