package fakevendor

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The embedded spec is the one derived in 2026-08 from langsmith-go f93f526f and
// langsmith-sdk bc8dd672; the exporter tests validate against it, so it changes only on
// purpose (re-derive it, then update this checksum).
func TestEmbeddedSpecIsThePinnedOne(t *testing.T) {
	sum := sha256.Sum256(LangSmithSpec())
	assert.Equal(t, "f2d8dfd9092674cd53b297f6dc51e62c3f973006db6694fd17e4f4b854dfc383", hex.EncodeToString(sum[:]))
}

func validRoot() map[string]any {
	return map[string]any{
		"id": "0e01bf50-474d-4536-810f-67d3ee7ea3e7", "trace_id": "0e01bf50-474d-4536-810f-67d3ee7ea3e7",
		"dotted_order": "20240919T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7",
		"name":         "root", "run_type": "chain", "start_time": "2024-09-19T17:16:48.521691Z", "end_time": "2024-09-19T17:16:49Z",
		"session_name": "p", "status": "success", "inputs": map[string]any{}, "outputs": map[string]any{}, "extra": map[string]any{},
	}
}

// The checker must catch what the server rejects, or the exporter tests prove nothing.
func TestCheckLangSmithRunCatchesViolations(t *testing.T) {
	assert.Empty(t, CheckLangSmithRun(validRoot()))
	cases := map[string]struct {
		mutate func(r map[string]any)
		want   string
	}{
		"3-digit fraction": {func(r map[string]any) { r["dotted_order"] = "20240919T171648521Z0e01bf50-474d-4536-810f-67d3ee7ea3e7" }, "is not YYYYMMDDTHHMMSSffffffZ<uuid>"},
		"root id":          {func(r map[string]any) { r["trace_id"] = "00000000-0000-0000-0000-000000000001" }, "root run id != trace_id"},
		"multi-part root": {func(r map[string]any) {
			r["dotted_order"] = r["dotted_order"].(string) + ".20240919T171648521691Z0e01bf50-474d-4536-810f-67d3ee7ea3e7"
		}, "single part for root runs"},
		"bad run type":      {func(r map[string]any) { r["run_type"] = "agent" }, `run_type "agent"`},
		"missing name":      {func(r map[string]any) { delete(r, "name") }, "missing name"},
		"bad uuid":          {func(r map[string]any) { r["parent_run_id"] = "nope" }, "schema RunIngest"},
		"inputs not object": {func(r map[string]any) { r["inputs"] = []any{} }, "inputs must be an object"},
		"exclusive usage": {func(r map[string]any) {
			r["run_type"] = "llm"
			r["outputs"] = map[string]any{"usage_metadata": map[string]any{"input_tokens": 10.0, "output_tokens": 1.0, "total_tokens": 11.0, "input_token_details": map[string]any{"cache_read": 20.0}}}
		}, "usage must be inclusive"},
		"unknown usage key": {func(r map[string]any) {
			r["run_type"] = "llm"
			r["outputs"] = map[string]any{"usage_metadata": map[string]any{"input_tokens": 1.0, "output_tokens": 1.0, "total_tokens": 2.0, "prompt_tokens": 1.0}}
		}, "schema UsageMetadata"},
		"usage on chain": {func(r map[string]any) {
			r["outputs"] = map[string]any{"usage_metadata": map[string]any{"input_tokens": 1.0, "output_tokens": 1.0, "total_tokens": 2.0}}
		}, "usage_metadata on a non-llm run"},
		"error without text": {func(r map[string]any) { r["status"] = "error" }, "status error without error text"},
	}
	for name, tc := range cases {
		r := validRoot()
		tc.mutate(r)
		v := CheckLangSmithRun(r)
		assert.True(t, strings.Contains(strings.Join(v, "\n"), tc.want), "%s: %v", name, v)
	}
}

func TestViolationsSeeBrokenChains(t *testing.T) {
	f := NewLangSmith("k")
	defer f.Close()
	root := validRoot()
	child := validRoot()
	child["id"] = "00000000-0000-0000-0000-000000000002"
	child["parent_run_id"] = root["id"]
	// skips a level: the parent's dotted_order plus two segments
	child["dotted_order"] = root["dotted_order"].(string) + ".20240919T171648521691Z00000000-0000-0000-0000-000000000009.20240919T171648521691Z00000000-0000-0000-0000-000000000002"
	f.runs[root["id"].(string)] = root
	f.runs[child["id"].(string)] = child
	f.order = []string{root["id"].(string), child["id"].(string)}
	v := f.Violations()
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "does not extend parent's")
}
