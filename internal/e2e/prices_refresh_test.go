//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
)

// refreshInterval is the collector's price_refresh interval in this test.
const refreshInterval = 2 * time.Second

// newerSnapshot is the embedded snapshot as a newer dataset would be: another version and
// date, and a model it did not have (gpt-9 at input $/M, output 4×).
func newerSnapshot(t *testing.T, version, date string, input float64) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "pricing", "genai-prices.json"))
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(b, &s))
	s["version"], s["date"] = version, date
	for _, p := range s["providers"].([]any) {
		if pm := p.(map[string]any); pm["id"] == "openai" {
			pm["models"] = append([]any{map[string]any{"id": "gpt-9", "match": map[string]any{"starts_with": "gpt-9"},
				"prices": map[string]any{"input_mtok": input, "output_mtok": input * 4}}}, pm["models"].([]any)...)
		}
	}
	out, err := json.Marshal(s)
	require.NoError(t, err)
	return out
}

// datasetServer serves whatever the test sets.
type datasetServer struct {
	*httptest.Server
	mu sync.Mutex
	h  http.HandlerFunc
}

func (d *datasetServer) set(h http.HandlerFunc) { d.mu.Lock(); d.h = h; d.mu.Unlock() }

func serveBytes(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(b) }
}

// datasetVersion is the version label of the collector's dataset age metric ("" before
// the first scrape answers).
func datasetVersion(telemetryPort int) string {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetryPort))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `otelcol_processor_genaicost_price_dataset_age{version="`); ok {
			return rest[:strings.IndexByte(rest, '"')]
		}
	}
	return ""
}

// The collector with price_refresh pointed at a loopback server: it picks a newer
// dataset up within one interval, keeps the table in use on a 500, a truncated body and a
// malformed price, and says why in one log line each time.
func TestPriceRefreshEndToEnd(t *testing.T) {
	ports := setSidecarEnv(t)
	ds := &datasetServer{}
	ds.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ds.mu.Lock()
		h := ds.h
		ds.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(ds.Close)
	ds.set(serveBytes(newerSnapshot(t, "9.9.9", "2026-11-25", 1)))

	dir := t.TempDir()
	tracesFile := filepath.Join(dir, "traces.jsonl")
	t.Setenv("AGENTMETER_DEMO_TRACES_FILE", tracesFile)
	overlay := filepath.Join(dir, "refresh.yaml")
	require.NoError(t, os.WriteFile(overlay, []byte(fmt.Sprintf("processors:\n  genaicost:\n    price_refresh: {url: %q, interval: %s}\n",
		ds.URL+"/data.json?token=s3cret", refreshInterval)), 0o600))
	col := StartWithArgs(t, dir, ports.OTLPHTTP,
		"--config", filepath.Join(RepoRoot(), "otelcol-config.yaml"),
		"--config", filepath.Join(RepoRoot(), "cmd", "demoreport", "overlay.yaml"),
		"--config", overlay,
		"--feature-gates=confmap.enableMergeAppendOption")

	calls := 0
	// priceGPT9 sends one gpt-9 call (1M input, 1M output) and returns its cost (false: none)
	priceGPT9 := func() (float64, bool) {
		calls++
		thread := fmt.Sprintf("t-refresh-%d", calls)
		now := time.Now().UTC()
		body := fmt.Sprintf(`{"records":[{"thread_id":%q,"run_id":"r-%d","source_run_id":"c-%d","caller":"lead_agent","model_name":"gpt-9","provider":"openai",
		  "input_tokens":1000000,"output_tokens":1000000,"start_time":%q,"end_time":%q}]}`, thread, calls, calls, now.Format(time.RFC3339Nano), now.Add(time.Second).Format(time.RFC3339Nano))
		resp, err := http.Post("http://"+ports.AgentUsage+"/v1/usage", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var cost float64
		var priced, seen bool
		require.Eventually(t, func() bool {
			tds, _ := ReadTraces(tracesFile)
			for _, sp := range Spans(tds) {
				if v, ok := sp.Attributes().Get(genai.AttrConversationID); ok && v.Str() == thread {
					if _, ok := genai.UsageFromMap(sp.Attributes()); ok {
						c, _, ok := genai.CostFromMap(sp.Attributes())
						cost, priced, seen = c.Total, ok, true
					}
				}
			}
			return seen
		}, 30*time.Second, 100*time.Millisecond, "the gpt-9 call never came out")
		return cost, priced
	}

	require.Eventually(t, func() bool { return datasetVersion(ports.Telemetry) == "9.9.9" }, 3*refreshInterval, 50*time.Millisecond,
		"the first refresh is at start")
	cost, ok := priceGPT9()
	require.True(t, ok, "gpt-9 is priced from the refreshed dataset")
	assert.InDelta(t, 5.0, cost, 1e-9)

	ds.set(serveBytes(newerSnapshot(t, "9.9.10", "2026-11-30", 2)))
	changed := time.Now()
	require.Eventually(t, func() bool { return datasetVersion(ports.Telemetry) == "9.9.10" }, 3*refreshInterval, 50*time.Millisecond)
	took := time.Since(changed)
	assert.Less(t, took, refreshInterval+time.Second, "picked up within one interval")
	cost, _ = priceGPT9()
	assert.InDelta(t, 10.0, cost, 1e-9)
	t.Logf("the newer dataset was in use %s after it was served (interval %s)", took.Round(10*time.Millisecond), refreshInterval)

	good := newerSnapshot(t, "9.9.11", "2026-12-01", 3)
	malformed := newerSnapshot(t, "9.9.11", "2026-12-01", -3)
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		why  string
	}{
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) }, "status 500 Internal Server Error"},
		{"truncated body", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(good)))
			_, _ = w.Write(good[:len(good)/2])
		}, "unexpected EOF"},
		{"malformed price", serveBytes(malformed), "openai/gpt-9 (models[0]): prices[0].input_mtok must be a finite non-negative number, got -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds.set(tc.h)
			var line string
			require.Eventually(t, func() bool {
				for _, l := range strings.Split(col.Logs(), "\n") {
					if strings.Contains(l, "price refresh failed") && strings.Contains(l, tc.why) {
						line = l
						return true
					}
				}
				return false
			}, 3*refreshInterval, 50*time.Millisecond, "no log line saying %q", tc.why)
			assert.Contains(t, line, `"dataset_version": "9.9.10"`, "the line names the dataset kept")
			assert.NotContains(t, line, "s3cret", "the URL's query is not logged")
			assert.Equal(t, "9.9.10", datasetVersion(ports.Telemetry))
			cost, ok := priceGPT9()
			require.True(t, ok)
			assert.InDelta(t, 10.0, cost, 1e-9, "the last good table stays")
		})
	}

	ds.set(serveBytes(good))
	require.Eventually(t, func() bool { return datasetVersion(ports.Telemetry) == "9.9.11" }, 3*refreshInterval, 50*time.Millisecond, "a good dataset after failures is taken")
	cost, _ = priceGPT9()
	assert.InDelta(t, 15.0, cost, 1e-9)
}
