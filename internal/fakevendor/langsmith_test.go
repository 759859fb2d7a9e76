package fakevendor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/textproto"
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
	assert.Equal(t, "5a6830a79967d87e2b054468847afcac5d1fa739b13474d524d4062054e7bfb2", hex.EncodeToString(sum[:]))
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

// multipartBody builds an ingest body of (operation, run) pairs, each run split into its
// head and field parts as the SDKs send them.
func multipartBody(t *testing.T, ops ...any) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(ops); i += 2 {
		op, run := ops[i].(string), ops[i+1].(map[string]any)
		head := map[string]any{}
		for k, v := range run {
			if !splitFields[k] {
				head[k] = v
			}
		}
		write := func(name string, v any) {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="`+name+`"`)
			h.Set("Content-Type", "application/json")
			pw, err := mw.CreatePart(h)
			require.NoError(t, err)
			require.NoError(t, json.NewEncoder(pw).Encode(v))
		}
		id := run["id"].(string)
		write(op+"."+id, head)
		for k, v := range run {
			if splitFields[k] {
				write(op+"."+id+"."+k, v)
			}
		}
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func send(t *testing.T, f *LangSmith, path, ctype string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "k")
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func withOutputs(run map[string]any, total float64) map[string]any {
	out := map[string]any{}
	for k, v := range run {
		out[k] = v
	}
	out["extra"] = map[string]any{"metadata": map[string]any{"subagent_usage": map[string]any{"total": total}}}
	return out
}

func subagentTotal(run map[string]any) any {
	return run["extra"].(map[string]any)["metadata"].(map[string]any)["subagent_usage"].(map[string]any)["total"]
}

// A second post of a run id is a 409 that changes nothing, as at the service; the other
// runs of that request are taken.
func TestLangSmithSecondPostIsAConflictThatChangesNothing(t *testing.T) {
	f := NewLangSmith("k")
	defer f.Close()
	root := validRoot()
	ct, body := multipartBody(t, "post", withOutputs(root, 1))
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))

	other := validRoot()
	other["id"], other["trace_id"] = "0e01bf50-474d-4536-810f-000000000002", "0e01bf50-474d-4536-810f-000000000002"
	other["dotted_order"] = "20240919T171648521691Z0e01bf50-474d-4536-810f-000000000002"
	ct, body = multipartBody(t, "post", withOutputs(root, 2), "post", other)
	assert.Equal(t, http.StatusConflict, send(t, f, "/runs/multipart", ct, body))
	assert.EqualValues(t, 1, subagentTotal(f.Runs()[root["id"].(string)]), "the first post stays")
	assert.Equal(t, 2, f.RunCount(), "the new run of the same request is taken")

	// the batch endpoint answers the same
	raw, _ := json.Marshal(map[string]any{"post": []any{withOutputs(root, 3)}})
	assert.Equal(t, http.StatusConflict, send(t, f, "/runs/batch", "application/json", raw))
	assert.EqualValues(t, 1, subagentTotal(f.Runs()[root["id"].(string)]))
	assert.Zero(t, f.Patches(root["id"].(string)))
	assert.Empty(t, f.Violations())
}

// A patch replaces the fields it carries, by multipart and by batch; a patch that arrives
// before its post is held and wins over the post.
func TestLangSmithPatchUpdatesTheRun(t *testing.T) {
	f := NewLangSmith("k")
	defer f.Close()
	root := validRoot()
	id := root["id"].(string)
	ct, body := multipartBody(t, "post", withOutputs(root, 1))
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))
	ct, body = multipartBody(t, "patch", withOutputs(root, 5))
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))
	assert.EqualValues(t, 5, subagentTotal(f.Runs()[id]))
	raw, _ := json.Marshal(map[string]any{"patch": []any{withOutputs(root, 7)}})
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/batch", "application/json", raw))
	assert.EqualValues(t, 7, subagentTotal(f.Runs()[id]))
	assert.Equal(t, 2, f.Patches(id))
	reqs := f.Requests()
	assert.Equal(t, []string{id}, reqs[1].PatchIDs)
	assert.Empty(t, reqs[1].RunIDs)

	// patch first, post later: the patch is held, then applied over the post
	late := validRoot()
	lid := "0e01bf50-474d-4536-810f-000000000003"
	late["id"], late["trace_id"], late["dotted_order"] = lid, lid, "20240919T171648521691Z"+lid
	ct, body = multipartBody(t, "patch", withOutputs(late, 9))
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))
	assert.Equal(t, 1, f.PendingPatches())
	_, ok := f.Runs()[lid]
	assert.False(t, ok, "a patch alone is no run")
	ct, body = multipartBody(t, "post", withOutputs(late, 4))
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))
	assert.EqualValues(t, 9, subagentTotal(f.Runs()[lid]))
	assert.Zero(t, f.PendingPatches())
	assert.Empty(t, f.Violations())

	// a patch that moves the run in its tree is a violation
	moved := withOutputs(root, 8)
	moved["dotted_order"] = "20240919T171648521692Z" + id
	ct, body = multipartBody(t, "patch", moved)
	require.Equal(t, http.StatusAccepted, send(t, f, "/runs/multipart", ct, body))
	assert.Contains(t, strings.Join(f.Violations(), "\n"), "changes dotted_order")
}
