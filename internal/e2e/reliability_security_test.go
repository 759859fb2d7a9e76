//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor/faulty"
)

// rawRequest sends a request with exactly the given headers and path (no client-side
// path cleaning) and returns the status.
func rawRequest(t *testing.T, method, url string, body string, hdr ...string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Auth bypass attempts against the agentusage receiver (api_keys set) fail with 401 and
// put nothing into the pipeline; the key never appears in logs or metrics.
func TestReliabilityReceiverAuthBypass(t *testing.T) {
	r := startBadInputRig(t)
	base := "http://" + r.au
	rec := func(marker string) string { return validRecord(marker) }
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	attempts := []struct {
		name string
		path string
		hdr  []string
	}{
		{"no credentials", "/v1/usage", nil},
		{"wrong x-api-key", "/v1/usage", []string{"x-api-key", "wrong"}},
		{"empty x-api-key", "/v1/usage", []string{"x-api-key", ""}},
		{"key prefix", "/v1/usage", []string{"x-api-key", badInputKey[:len(badInputKey)-1]}},
		{"key with a suffix", "/v1/usage", []string{"x-api-key", badInputKey + "x"}},
		{"key in other case", "/v1/usage", []string{"x-api-key", strings.ToUpper(badInputKey)}},
		{"key in the query", "/v1/usage?api_key=" + badInputKey + "&x-api-key=" + badInputKey, nil},
		{"Bearer wrong", "/v1/usage", []string{"Authorization", "Bearer wrong"}},
		{"Bearer empty", "/v1/usage", []string{"Authorization", "Bearer "}},
		{"Basic wrong secret", "/v1/usage", []string{"Authorization", "Basic " + b64("pk-lf-x:wrong")}},
		{"Basic key as user, no password", "/v1/usage", []string{"Authorization", "Basic " + b64(badInputKey+":")}},
		{"Basic not base64", "/v1/usage", []string{"Authorization", "Basic %%%"}},
		{"unknown scheme with the key", "/v1/usage", []string{"Authorization", "Token " + badInputKey}},
		{"langsmith face, wrong key", "/runs/batch", []string{"x-api-key", "wrong"}},
		{"langfuse face, no key", "/api/public/ingestion", nil},
		{"langfuse OTLP face, no key", "/api/public/otel/v1/traces", nil},
		{"api/v1 prefix, no key", "/api/v1/runs/batch", nil},
		{"dot-dot path, no key", "/info/../v1/usage", nil},
		{"double slash, no key", "//v1/usage", nil},
	}
	for i, a := range attempts {
		body := rec(fmt.Sprintf("bypass-%d", i))
		if strings.Contains(a.path, "runs") {
			body = `{"post":[]}`
		}
		st := rawRequest(t, http.MethodPost, base+a.path, body, append([]string{"Content-Type", "application/json"}, a.hdr...)...)
		switch {
		case st == http.StatusUnauthorized:
		case st == http.StatusNotFound || st == http.StatusMethodNotAllowed || st == http.StatusMovedPermanently || st == http.StatusTemporaryRedirect:
			// not a route: nothing was ingested either (checked below)
		default:
			t.Errorf("%s: status %d, want 401", a.name, st)
		}
	}
	// the right key through every accepted form works (the attempts were refused for the
	// key, not for something else)
	ok := [][]string{
		{"x-api-key", badInputKey},
		{"Authorization", "Bearer " + badInputKey},
		{"Authorization", "Basic " + b64("pk-lf-any:"+badInputKey)},
	}
	for i, h := range ok {
		st := rawRequest(t, http.MethodPost, base+"/v1/usage", rec(fmt.Sprintf("good-%d", i)), append([]string{"Content-Type", "application/json"}, h...)...)
		assert.Equal(t, 200, st, "accepted form %v", h[0])
	}
	WaitForSpans(t, r.out, len(ok), 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	tds, err := ReadTraces(r.out)
	require.NoError(t, err)
	spans := Spans(tds)
	for _, sp := range spans {
		assert.False(t, strings.HasPrefix(Str(sp, genai.AttrRunID), "run-bypass-"), "a refused request reached the pipeline: %s", Str(sp, genai.AttrRunID))
	}
	m, err := faulty.Scrape(r.metrics)
	require.NoError(t, err)
	assert.NotContains(t, m.Raw, badInputKey)
	assert.NotContains(t, r.c.Logs(), badInputKey)
	ReliabilityRow(t, fmt.Sprintf("receiver auth bypass: %d attempts on agentusage (wrong/empty/prefix/suffix/case keys, key in query, bad Basic/Bearer, other faces and path tricks)", len(attempts)),
		"401 (or 404 for a non-route); nothing enters the pipeline; the three accepted forms of the right key work; the key is in no log line or metric",
		"", "0 accepted", "", "", "")
}

// Auth bypass attempts against the gateway (`agentmeter serve`, runtime/gateway): no or
// wrong key 401, a read-only key cannot write (403), another user's thread is 404 (never
// 403, so its existence is not revealed), malformed ids 400; the keys never appear in
// the gateway's logs or /metrics.
func TestReliabilityGatewayAuthBypass(t *testing.T) {
	dir := t.TempDir()
	const alice, bob, reader = "gw-alice-SECRET-1111", "gw-bob-SECRET-2222", "gw-reader-SECRET-3333"
	g := startGateway(t, dir, fmt.Sprintf(`
models:
  - name: main
    provider: scripted
    model: scripted-demo
    context_window: 128000
sandbox:
  root: %s
gateway:
  api_keys:
    - {key_env: AM_SEC_ALICE, user_id: alice, scopes: [threads:read, threads:write]}
    - {key_env: AM_SEC_BOB, user_id: bob, scopes: [threads:read, threads:write]}
    - {key_env: AM_SEC_READER, user_id: alice, scopes: [threads:read]}
store:
  driver: sqlite
  dsn: %s
`, filepath.Join(dir, "threads"), filepath.Join(dir, "data", "agentmeter.db")),
		"AM_SEC_ALICE="+alice, "AM_SEC_BOB="+bob, "AM_SEC_READER="+reader, "OTEL_SDK_DISABLED=true")

	code, body := g.request(t, "POST", "/api/threads/t-alice/runs?wait=true", alice, `{"input":"hello"}`)
	require.Equal(t, 200, code, string(body))
	var run gatewayRun
	require.NoError(t, json.Unmarshal(body, &run))

	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	threadPath := "/api/threads/t-alice"
	runPath := "/api/threads/t-alice/runs/" + run.RunID
	attempts := []struct {
		name, method, path string
		hdr                []string
		want               int
	}{
		{"no key", "GET", threadPath + "/token-usage", nil, 401},
		{"wrong key", "GET", threadPath + "/token-usage", bearer("wrong"), 401},
		{"key prefix", "GET", threadPath + "/token-usage", bearer(alice[:len(alice)-1]), 401},
		{"key in other case", "GET", threadPath + "/token-usage", bearer(strings.ToLower(alice)), 401},
		{"key as x-api-key", "GET", threadPath + "/token-usage", []string{"X-API-Key", alice}, 401},
		{"key in the query", "GET", threadPath + "/token-usage?api_key=" + alice + "&access_token=" + alice, nil, 401},
		{"Basic with the key", "GET", threadPath + "/token-usage", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(alice+":"+alice))}, 401},
		{"Bearer empty", "GET", threadPath + "/token-usage", []string{"Authorization", "Bearer "}, 401},
		{"no key, write", "POST", threadPath + "/runs", nil, 401},
		{"read-only key writes", "POST", threadPath + "/runs", bearer(reader), 403},
		{"read-only key cancels", "POST", runPath + "/cancel", bearer(reader), 403},
		{"other user reads the thread", "GET", threadPath, bearer(bob), 404},
		{"other user reads token usage", "GET", threadPath + "/token-usage", bearer(bob), 404},
		{"other user reads the run", "GET", runPath, bearer(bob), 404},
		{"other user streams the run", "GET", runPath + "/stream", bearer(bob), 404},
		{"other user cancels the run", "POST", runPath + "/cancel", bearer(bob), 404},
		{"other user runs in the thread", "POST", threadPath + "/runs", bearer(bob), 404},
		{"malformed thread id", "GET", "/api/threads/..%2f..%2fetc/token-usage", bearer(alice), 400},
	}
	for _, a := range attempts {
		body := ""
		if a.method == "POST" {
			body = `{"input":"x"}`
		}
		st := rawRequest(t, a.method, g.URL+a.path, body, append([]string{"Content-Type", "application/json"}, a.hdr...)...)
		assert.Equal(t, a.want, st, a.name)
	}
	// the owner and the read-only key of the same user can read
	assert.Equal(t, 200, rawRequest(t, "GET", g.URL+threadPath+"/token-usage", "", bearer(alice)...))
	assert.Equal(t, 200, rawRequest(t, "GET", g.URL+runPath, "", bearer(reader)...))
	// bob's attempts created nothing in alice's thread
	code, body = g.request(t, "GET", threadPath+"/token-usage", alice, "")
	require.Equal(t, 200, code)
	assert.Contains(t, string(body), `"total_runs":1`, string(body))

	resp, err := http.Get(g.URL + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	logs := g.logs.String()
	for _, k := range []string{alice, bob, reader} {
		assert.NotContains(t, logs, k)
		assert.NotContains(t, string(metrics), k)
	}
	ReliabilityRow(t, fmt.Sprintf("gateway auth bypass: %d attempts on `agentmeter serve`", len(attempts)),
		"401 without a valid Bearer key (query, x-api-key, Basic, prefix, case all refused); 403 for a read-only key writing; 404 for another user's thread/run (never 403); 400 for a traversal id; keys in no log line or /metrics",
		"", "0 accepted", "", "", "")
}
