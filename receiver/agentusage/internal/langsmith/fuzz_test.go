package langsmith

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecodeBatch: any /runs/batch body decodes or is refused; translating what
// decodes never panics.
func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"post":[{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a0","run_type":"llm","end_time":1767225600000,"outputs":{"usage_metadata":{"input_tokens":"5","input_token_details":{"cache_read":-1}}}}]}`))
	f.Add([]byte(`{"patch":[{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a0","dotted_order":"Z.Z.Z","parent_run_id":"x"}]}`))
	f.Add([]byte(`{"post":[{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a0","run_type":"tool","outputs":{"a":[[[[{"tool_calls":[{"id":1}]}]]]]},"tags":[1,"lead_agent"]}]}`))
	f.Add([]byte(`{"post":null,"patch":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, _, err := DecodeBatch(body)
		if err != nil {
			return
		}
		tr := NewTranslator(time.Minute, 10)
		p := tr.Plan(ops)
		p.Build()
		p.Commit(t0)
		tr.BuildRuns(tr.Drain())
		checkPrepareSame(t, decodeBatchOps, body)
	})
}

// FuzzDecodeMultipart: any multipart body decodes or is refused; never a panic.
func FuzzDecodeMultipart(f *testing.F) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "multipart_sdk.txt"))
	ct, _ := os.ReadFile(filepath.Join("testdata", "multipart_sdk.content-type"))
	f.Add(seed)
	f.Add([]byte("------LangSmithFormBoundary5ngw3md24wu\r\nContent-Disposition: form-data; name=\"post.\"\r\n\r\n{}\r\n------LangSmithFormBoundary5ngw3md24wu--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, _, err := DecodeMultipart(string(ct), bytes.NewReader(body))
		if err != nil {
			return
		}
		NewTranslator(time.Minute, 10).Plan(ops).Build()
		checkPrepareSame(t, func(b []byte) ([]Op, error) {
			ops, _, err := DecodeMultipart(string(ct), bytes.NewReader(b))
			return ops, err
		}, body)
	})
}

// FuzzDecodeRun covers POST /runs and PATCH /runs/{id}.
func FuzzDecodeRun(f *testing.F) {
	f.Add([]byte(`{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a0","start_time":"2026-01-01T00:00:00","end_time":1e300}`), true)
	f.Add([]byte(`{"error":{"a":1},"extra":{"metadata":{"thread_id":3}}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, patch bool) {
		op, err := DecodeRun(body, patch, "01a22a31-cdeb-7000-8000-037a8c6bd3a0")
		if err != nil {
			return
		}
		NewTranslator(time.Minute, 10).BuildRuns([]Run{op.Run})
	})
}
