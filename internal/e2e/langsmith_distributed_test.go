//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A service traced by the LangSmith JS SDK calls `agentmeter serve` with its run's
// distributed-tracing headers (langsmith-trace): the gateway run's spans are placed
// under the caller's run from their start, so the shipped sidecar streams them to
// LangSmith inside the caller's trace and project, with its run as their parent, in the
// tree the fake checks, whatever the OTel trace. No run is posted twice.
func TestLangSmithSDKCallerGetsTheGatewayRunUnderItsOwn(t *testing.T) {
	ports, fake, _ := startShippedToLangSmith(t, "e2e-distributed")
	dir := t.TempDir()

	const key = "e2e-distributed-key"
	g := startGateway(t, dir, demoGatewayConfig(dir),
		"AGENTMETER_E2E_GATEWAY_KEY="+key,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ports.OTLPHTTP,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)

	// the caller's project is not the sidecar's: the SDK names it in its baggage
	out := RunNode(t, "langsmith-distributed-caller.mjs", "LANGSMITH_ENDPOINT="+fake.URL, "LANGSMITH_API_KEY="+langSmithTestKey,
		"LANGSMITH_PROJECT=caller app", "GATEWAY_URL="+g.URL, "GATEWAY_KEY="+key)
	var caller struct {
		ID          string     `json:"id"`
		TraceID     string     `json:"trace_id"`
		DottedOrder string     `json:"dotted_order"`
		Status      int        `json:"status"`
		Run         gatewayRun `json:"run"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &caller), out)
	require.Equal(t, 200, caller.Status, out)
	require.Equal(t, "success", caller.Run.Status, out)

	// the gateway's runs: every run of the fake but the caller's own
	var children, runs int
	require.Eventually(t, func() bool {
		children, runs = 0, 0
		for id, r := range fake.Runs() {
			if id == caller.ID {
				continue
			}
			runs++
			if r["parent_run_id"] == caller.ID {
				children++
			}
		}
		return children == 1 && runs >= 5
	}, 30*time.Second, 50*time.Millisecond, "the gateway run's root under the caller's run")
	for id, r := range fake.Runs() {
		assert.Equal(t, caller.TraceID, r["trace_id"], "run %s (%v) in the caller's trace", id, r["name"])
		d, _ := r["dotted_order"].(string)
		assert.True(t, strings.HasPrefix(d, caller.DottedOrder), "run %s placed under the caller's run: %s", id, d)
		assert.Equal(t, "caller app", r["session_name"], "run %s in the caller's project", id)
		// the caller's run metadata, as LangSmith's SDKs give it to every run under it
		extra, _ := r["extra"].(map[string]any)
		md, _ := extra["metadata"].(map[string]any)
		assert.Equal(t, "acme", md["customer"], "run %s (%v) has the caller's metadata", id, r["name"])
		assert.EqualValues(t, 2, md["tier"], "run %s (%v)", id, r["name"])
	}
	assert.Equal(t, "caller_service", fake.Runs()[caller.ID]["name"])
	// The caller's own run is the SDK's: the JS SDK sends end_time as epoch milliseconds,
	// which LangSmith takes and the schema the fake checks by does not list.
	var ours []string
	for _, v := range fake.Violations() {
		if !strings.HasPrefix(v, "run "+caller.ID+":") {
			ours = append(ours, v)
		}
	}
	assert.Empty(t, ours)
	for _, req := range fake.Requests() {
		assert.NotEqual(t, 409, req.Status, "a run posted twice")
	}
}
