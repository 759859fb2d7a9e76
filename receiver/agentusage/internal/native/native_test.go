package native

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/goldentest"
)

var fixedNow = time.Date(2026, 1, 1, 0, 0, 9, 0, time.UTC)

func TestGoldenRecords(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "records.json"))
	require.NoError(t, err)
	res, err := Decode(body, fixedNow)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Accepted)
	require.Len(t, res.Errors, 1)
	assert.Equal(t, 4, res.Errors[0].Index)
	assert.Contains(t, res.Errors[0].Message, "total_tokens: is 4 but input_tokens + output_tokens is 5")
	assert.Contains(t, res.Errors[0].Message, "cache_read_tokens")
	goldentest.Compare(t, filepath.Join("testdata", "records.expected.yaml"), res.Traces)
}

func TestDecodeShapes(t *testing.T) {
	one := `{"run_id":"r","source_run_id":"s","input_tokens":1,"output_tokens":2}`
	for name, body := range map[string]string{
		"object":  one,
		"array":   "[" + one + "]",
		"records": `{"records":[` + one + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Decode([]byte(body), fixedNow)
			require.NoError(t, err)
			assert.Equal(t, 1, res.Accepted)
			assert.Equal(t, 2, res.Traces.SpanCount(), "root + chat")
		})
	}
	for name, body := range map[string]string{
		"empty":        "",
		"scalar":       "42",
		"records type": `{"records":{}}`,
		"broken":       `[{"run_id":`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(body), fixedNow)
			require.ErrorIs(t, err, ErrBody)
		})
	}
}

func TestRecordErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		`{"source_run_id":"s"}`:                                           "run_id: is required",
		`{"run_id":"r","source_run_id":7}`:                                "source_run_id: must be a string",
		`{"run_id":"r","source_run_id":"s","trace_id":"xyz"}`:             "trace_id: must be 32 hex digits or a UUID",
		`{"run_id":"r","source_run_id":"s","output_tokens":1.5}`:          "output_tokens: must be a non-negative integer",
		`{"run_id":"r","source_run_id":"s","reasoning_tokens":3}`:         "reasoning_tokens (3) exceed output_tokens (0)",
		`{"run_id":"r","source_run_id":"s","start_time":"noon"}`:          "start_time:",
		`{"run_id":"r","source_run_id":"s","response_tool_call_ids":[1]}`: "response_tool_call_ids[0]: must be a non-empty string",
		`"just a string"`: "record must be a JSON object",
	}
	for body, want := range cases {
		res, err := Decode([]byte("["+body+"]"), fixedNow)
		require.NoError(t, err)
		require.Len(t, res.Errors, 1, body)
		assert.Contains(t, res.Errors[0].Message, want, body)
	}
}

func TestRecordWithoutUsageHasNoUsageAttributes(t *testing.T) {
	res, err := Decode([]byte(`{"run_id":"r","source_run_id":"s","model_name":"m"}`), fixedNow)
	require.NoError(t, err)
	chat := res.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	_, ok := genai.UsageFromMap(chat.Attributes())
	assert.False(t, ok, "no usage reported: no usage attributes, not zeros")
}

func TestSameRecordSameIDs(t *testing.T) {
	body := []byte(`{"thread_id":"t","run_id":"r","source_run_id":"s","input_tokens":3,"output_tokens":1}`)
	a, err := Decode(body, fixedNow)
	require.NoError(t, err)
	b, err := Decode(body, fixedNow.Add(time.Hour))
	require.NoError(t, err)
	sa := a.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	sb := b.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < sa.Len(); i++ {
		assert.Equal(t, sa.At(i).TraceID(), sb.At(i).TraceID())
		assert.Equal(t, sa.At(i).SpanID(), sb.At(i).SpanID())
	}
	u, ok := genai.UsageFromMap(sa.At(1).Attributes())
	require.True(t, ok)
	assert.Equal(t, genai.Usage{Input: 3, Output: 1}, u)
}

// The one decoder reads JSON as encoding/json would: escaped keys and strings, the last
// of duplicate keys, null as absent; anything of the wrong type is named.
func TestDecodeReadsJSONLikeEncodingJSON(t *testing.T) {
	res, err := Decode([]byte(`[{"run_id":"r","source_run_id":"s1","\u006dodel_name":"gpt-\u0034o","caller":null,
		"input_tokens":5,"input_tokens":7,"output_tokens":1,"thread_id":"th","unknown":{"deep":[1,2,{"x":null}]}}]`), fixedNow)
	require.NoError(t, err)
	require.Equal(t, 1, res.Accepted, "%v", res.Errors)
	recs := mustRecords(t, `{"run_id":"r","source_run_id":"s1","\u006dodel_name":"gpt-\u0034o","caller":null,"input_tokens":5,"input_tokens":7,"output_tokens":1}`)
	chat := recs[0]
	assert.Equal(t, "gpt-4o", chat.ModelName)
	assert.Equal(t, int64(7), chat.Usage.Input, "the last of duplicate keys wins")
	assert.Equal(t, genai.BucketLeadAgent, chat.Caller, "null is absent")

	res, err = Decode([]byte(`{"records":[{"run_id":1,"source_run_id":"s","input_tokens":"5","output_tokens":-1,
		"response_tool_call_ids":["a",""],"start_time":true},{"run_id":"ok","source_run_id":"s2"}]}`), fixedNow)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Accepted)
	require.Len(t, res.Errors, 1)
	for _, want := range []string{"run_id: must be a string", "input_tokens: must be a non-negative integer",
		"output_tokens: must be a non-negative integer, got -1", "response_tool_call_ids[1]: must be a non-empty string", "start_time:"} {
		assert.Contains(t, res.Errors[0].Message, want)
	}
	for _, bad := range []string{``, ` `, `{`, `"x"`, `{"records":{}}`, `[1,]`} {
		_, err := Decode([]byte(bad), fixedNow)
		assert.ErrorIs(t, err, ErrBody, "%q", bad)
	}
}

func mustRecords(t *testing.T, body string) []Record {
	t.Helper()
	doc, items, err := splitItems([]byte(body))
	require.NoError(t, err)
	var out []Record
	for _, raw := range items {
		r, err := parseRecord(doc, raw, fixedNow)
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}
