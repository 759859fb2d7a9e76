//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

// replicaSet is several `agentmeter serve` processes sharing one PostgreSQL database,
// as a user scales the gateway out behind a load balancer.
type replicaSet struct {
	gws []*gatewayProcess
	key string
}

// startReplicas starts n gateways on a fresh database of pg with the scripted model
// script; extraGateway is added under gateway: (indented two spaces).
func startReplicas(t *testing.T, pg *storetest.PostgresServer, n int, script, extraGateway string) *replicaSet {
	t.Helper()
	dsn := pg.NewDatabase(t)
	shared := t.TempDir()
	scriptPath := filepath.Join(shared, "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o600))
	const key = "e2e-replicas-key"
	cfg := fmt.Sprintf(`
models:
  - {name: main, provider: scripted, model: scripted-replicas, script: %s, context_window: 128000}
sandbox: {root: %s}
settings:
  runtime: {base_dir: %s}
telemetry: {enabled: false}
gateway:
  api_keys:
    - {key_env: AGENTMETER_E2E_REPLICAS_KEY, user_id: alice, scopes: [threads:read, threads:write]}
%s
store: {driver: postgres, dsn_env: AGENTMETER_E2E_REPLICAS_DSN}
`, scriptPath, filepath.Join(shared, "threads"), filepath.Join(shared, "base"), extraGateway)
	rs := &replicaSet{key: key}
	for range n {
		rs.gws = append(rs.gws, startGateway(t, t.TempDir(), cfg,
			"AGENTMETER_E2E_REPLICAS_KEY="+key, "AGENTMETER_E2E_REPLICAS_DSN="+dsn))
	}
	return rs
}

// replicaRun is the part of a run row the replica tests read.
type replicaRun struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Usage  struct {
		LastAIMessage string `json:"last_ai_message"`
	} `json:"usage"`
	FinishedAt *time.Time `json:"finished_at"`
}

func (rs *replicaSet) getRun(t *testing.T, g *gatewayProcess, thread, runID string) replicaRun {
	t.Helper()
	code, b := g.request(t, "GET", "/api/threads/"+thread+"/runs/"+runID, rs.key, "")
	require.Equal(t, 200, code, string(b))
	var r replicaRun
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// waitStatus polls g until the run's status is one of want, or fails after within.
func (rs *replicaSet) waitStatus(t *testing.T, g *gatewayProcess, thread, runID string, within time.Duration, want ...string) replicaRun {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := rs.getRun(t, g, thread, runID)
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after %s, want %v", runID, r.Status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postAnswer is one answer of postAtOnce: status 0 and the error when the request failed.
type postAnswer struct {
	code int
	body string
}

// postAtOnce sends n POSTs of body to path at the same moment, alternating the replicas,
// and returns each one's answer in the order sent.
func (rs *replicaSet) postAtOnce(t *testing.T, n int, path, body string) []postAnswer {
	t.Helper()
	answers := make([]postAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", rs.gws[i%len(rs.gws)].URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+rs.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers[i] = postAnswer{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers[i] = postAnswer{resp.StatusCode, string(b)}
		}()
	}
	close(start)
	wg.Wait()
	return answers
}

// startRunning posts input as a run of thread to the first replica and waits until the
// run is running; it returns the run, the replica executing it and the other one.
func (rs *replicaSet) startRunning(t *testing.T, thread, input string) (r replicaRun, exec, other *gatewayProcess) {
	t.Helper()
	a, b := rs.gws[0], rs.gws[1]
	code, body := a.request(t, "POST", "/api/threads/"+thread+"/runs", rs.key, `{"input":"`+input+`"}`)
	require.Equal(t, 202, code, string(body))
	require.NoError(t, json.Unmarshal(body, &r))
	rs.waitStatus(t, a, thread, r.RunID, 10*time.Second, "running")
	exec, other = a, b
	if rs.activeRuns(t, a) == 0 {
		exec, other = b, a
	}
	require.Equal(t, 1, rs.activeRuns(t, exec))
	return r, exec, other
}

// activeRuns reads a gateway's agentmeter_gateway_runs_active gauge: the runs that
// process executes.
func (rs *replicaSet) activeRuns(t *testing.T, g *gatewayProcess) int {
	t.Helper()
	code, b := g.request(t, "GET", "/metrics", "", "")
	require.Equal(t, 200, code)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "agentmeter_gateway_runs_active "); ok {
			var n float64
			_, err := fmt.Sscan(v, &n)
			require.NoError(t, err)
			return int(n)
		}
	}
	t.Fatalf("no agentmeter_gateway_runs_active in /metrics:\n%s", b)
	return 0
}
