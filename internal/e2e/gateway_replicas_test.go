//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

// replicasScript is a slow model: every answer takes a while, so runs of one thread
// posted together overlap unless the line of runs holds them apart.
const replicasScript = `
conversations:
  - name: reject
    caller: lead_agent
    first_human_contains: "reject"
    turns:
      - {content: "the one run", delay: 1500ms, usage: {input: 10, output: 1}}
  - name: queue
    caller: lead_agent
    first_human_contains: "queue"
    turns:
      - {content: "answer 1", delay: 400ms, usage: {input: 10, output: 1}}
      - {content: "answer 2", delay: 400ms, usage: {input: 20, output: 1}}
      - {content: "answer 3", delay: 400ms, usage: {input: 30, output: 1}}
      - {content: "answer 4", delay: 400ms, usage: {input: 40, output: 1}}
      - {content: "answer 5", delay: 400ms, usage: {input: 50, output: 1}}
  - name: crash
    caller: lead_agent
    first_human_contains: "never finishes"
    turns:
      - {content: "too late", delay: 60s, usage: {input: 10, output: 1}}
  - name: cancel
    caller: lead_agent
    first_human_contains: "cancel me"
    turns:
      - tool_calls: [{id: call_sleep, name: bash, args: {command: "sleep 30", description: "Take long"}}]
        usage: {input: 10, output: 1}
      - {content: "after the cancel", usage: {input: 20, output: 1}}
  - name: after
    caller: lead_agent
    first_human_contains: "after the crash"
    turns:
      - {content: "taken over", usage: {input: 10, output: 1}}
  - name: title
    caller: "middleware:title"
    turns: [{content: "A thread", usage: {input: 4, output: 1}}]
`

// leaseTimeout is the replicas' gateway.lease_timeout: short, so a killed replica's run
// ends within the test.
const leaseTimeout = 3 * time.Second

// TestGatewayReplicasBehaveAsOne runs two `agentmeter serve` processes on one real
// PostgreSQL with a slow scripted model: the line of runs per thread holds across them.
func TestGatewayReplicasBehaveAsOne(t *testing.T) {
	pg, err := storetest.StartPostgres()
	pg = storetest.RequirePostgres(t, pg, err)
	t.Cleanup(pg.Stop)
	rs := startReplicas(t, pg, 2, replicasScript, fmt.Sprintf("  lease_timeout: %s\n  poll_interval: 100ms", leaseTimeout))
	a, b := rs.gws[0], rs.gws[1]

	t.Run("reject: one runs, four get 409 on either replica", func(t *testing.T) {
		answers := rs.postAtOnce(t, 5, "/api/threads/rej/runs", `{"input":"reject me"}`)
		var accepted []string
		conflicts := 0
		for i, ans := range answers {
			switch ans.code {
			case 202:
				var r replicaRun
				require.NoError(t, json.Unmarshal([]byte(ans.body), &r))
				accepted = append(accepted, r.RunID)
			case 409:
				conflicts++
				assert.Contains(t, ans.body, "Thread rej already has a run in progress (run-", "answer %d", i)
			default:
				t.Fatalf("answer %d: %d %s", i, ans.code, ans.body)
			}
		}
		require.Len(t, accepted, 1, "answers %+v", answers)
		require.Equal(t, 4, conflicts)
		done := rs.waitStatus(t, b, "rej", accepted[0], 20*time.Second, "success")
		assert.Equal(t, "the one run", done.Usage.LastAIMessage)
		code, body := a.request(t, "GET", "/api/threads/rej", rs.key, "")
		require.Equal(t, 200, code)
		assert.Equal(t, 1, strings.Count(string(body), `"run_id"`), "a rejected run left a row: %s", body)
	})

	t.Run("enqueue: five run one after another in the order posted", func(t *testing.T) {
		var ids []string
		for i := range 5 {
			code, body := rs.gws[i%2].request(t, "POST", "/api/threads/q/runs", rs.key,
				fmt.Sprintf(`{"input":"queue turn %d","multitask_strategy":"enqueue"}`, i+1))
			require.Equal(t, 202, code, string(body))
			var r replicaRun
			require.NoError(t, json.Unmarshal(body, &r))
			ids = append(ids, r.RunID)
		}
		var prevFinish time.Time
		for i, id := range ids {
			r := rs.waitStatus(t, rs.gws[(i+1)%2], "q", id, 30*time.Second, "success", "error", "interrupted", "timeout")
			require.Equal(t, "success", r.Status, "run %d: %+v", i+1, r)
			// Answer k is the model's k-th turn: the request carried the k-1 earlier
			// exchanges, so run k started after run k-1 saved its state.
			assert.Equal(t, fmt.Sprintf("answer %d", i+1), r.Usage.LastAIMessage, "run %d", i+1)
			require.NotNil(t, r.FinishedAt)
			assert.False(t, r.FinishedAt.Before(prevFinish), "run %d finished before run %d", i+1, i)
			prevFinish = *r.FinishedAt
		}
		// The thread's state, read through either replica, holds every turn in order.
		for _, g := range rs.gws {
			code, body := g.request(t, "GET", "/api/threads/q/state", rs.key, "")
			require.Equal(t, 200, code, string(body))
			var st struct {
				Values struct {
					Messages []struct {
						Type    string `json:"type"`
						Content string `json:"content"`
					} `json:"messages"`
				} `json:"values"`
			}
			require.NoError(t, json.Unmarshal(body, &st))
			var turns []string
			for _, m := range st.Values.Messages {
				if strings.HasPrefix(m.Content, "queue turn ") || strings.HasPrefix(m.Content, "answer ") {
					turns = append(turns, m.Content)
				}
			}
			want := []string{}
			for k := 1; k <= 5; k++ {
				want = append(want, fmt.Sprintf("queue turn %d", k), fmt.Sprintf("answer %d", k))
			}
			assert.Equal(t, want, turns)
		}
	})

	t.Run("enqueue: five posted at once over both replicas run one after another", func(t *testing.T) {
		ids := make([]string, 5)
		for i, ans := range rs.postAtOnce(t, 5, "/api/threads/qa/runs", `{"input":"queue at once","multitask_strategy":"enqueue"}`) {
			var r replicaRun
			if ans.code == 202 && json.Unmarshal([]byte(ans.body), &r) == nil {
				ids[i] = r.RunID
			}
		}
		// Each run answers the turn its thread's state had reached: five different
		// answers 1..5 mean no two of them ran on the same state, i.e. at once.
		var answers []string
		for i, id := range ids {
			require.NotEmpty(t, id, "post %d was not accepted", i)
			r := rs.waitStatus(t, rs.gws[(i+1)%2], "qa", id, 30*time.Second, "success", "error", "interrupted", "timeout")
			require.Equal(t, "success", r.Status, "%+v", r)
			answers = append(answers, r.Usage.LastAIMessage)
		}
		sort.Strings(answers)
		assert.Equal(t, []string{"answer 1", "answer 2", "answer 3", "answer 4", "answer 5"}, answers)
	})

	t.Run("wait and cancel answer on the replica not executing the run", func(t *testing.T) {
		r, _, other := rs.startRunning(t, "c", "cancel me")
		// A run queued behind it, waited for on the replica not executing the thread.
		waited := make(chan string, 1)
		go func() {
			req, _ := http.NewRequest("POST", other.URL+"/api/threads/c/runs?wait=true", strings.NewReader(`{"input":"and then","multitask_strategy":"enqueue"}`))
			req.Header.Set("Authorization", "Bearer "+rs.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				waited <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			waited <- fmt.Sprintf("%d %s", resp.StatusCode, b)
		}()
		time.Sleep(300 * time.Millisecond) // the queued run is admitted
		code, body := other.request(t, "POST", "/api/threads/c/runs/"+r.RunID+"/cancel", rs.key, "")
		require.Equal(t, 202, code, string(body))
		var got replicaRun
		require.NoError(t, json.Unmarshal(body, &got))
		assert.Equal(t, "interrupted", got.Status, string(body))
		assert.Equal(t, "run cancelled by request", got.Error)
		select {
		case ans := <-waited:
			assert.True(t, strings.HasPrefix(ans, "200 "), ans)
			assert.Contains(t, ans, `"status":"success"`)
			assert.Contains(t, ans, `"last_ai_message":"after the cancel"`, "the queued run continued the cancelled turn")
		case <-time.After(20 * time.Second):
			t.Fatal("the waited run never answered")
		}
	})

	t.Run("a replica killed mid-run: its run ends error within the lease, the next starts elsewhere", func(t *testing.T) {
		first, victim, survivor := rs.startRunning(t, "k", "never finishes")
		code, body := survivor.request(t, "POST", "/api/threads/k/runs", rs.key, `{"input":"after the crash","multitask_strategy":"enqueue"}`)
		require.Equal(t, 202, code, string(body))
		var next replicaRun
		require.NoError(t, json.Unmarshal(body, &next))
		assert.Equal(t, "pending", rs.getRun(t, survivor, "k", next.RunID).Status, "the queued run waits for the running one")

		victim.Kill() // SIGKILL: no shutdown, no final write
		killed := time.Now()
		ended := rs.waitStatus(t, survivor, "k", first.RunID, 3*leaseTimeout, "error")
		took := time.Since(killed)
		t.Logf("killed replica's run ended %s after the kill (lease %s)", took.Round(10*time.Millisecond), leaseTimeout)
		assert.LessOrEqual(t, took, leaseTimeout+2*time.Second, "the run must end within the lease timeout (plus one renewal)")
		assert.Contains(t, ended.Error, "stopped renewing its lease for gateway.lease_timeout (3s)")
		done := rs.waitStatus(t, survivor, "k", next.RunID, 10*time.Second, "success", "error")
		require.Equal(t, "success", done.Status, "%+v", done)
		assert.Equal(t, "taken over", done.Usage.LastAIMessage)
		assert.Equal(t, 0, rs.activeRuns(t, survivor))
	})
}

// TestGatewaySQLiteRefusesASecondProcess: a second `agentmeter serve` on the SQLite file
// another one serves exits at start saying why and what to use instead.
func TestGatewaySQLiteRefusesASecondProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
models:
  - {name: main, provider: scripted, model: scripted-replicas, script: %s}
telemetry: {enabled: false}
store: {driver: sqlite, dsn: %s}
`, filepath.Join(dir, "script.yaml"), filepath.Join(dir, "data", "agentmeter.db"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(replicasScript), 0o600))
	first := startGateway(t, dir, cfg)
	second := startProcess(t, dir, nil, AgentmeterBinary(t), "serve", "--config", filepath.Join(dir, "config.yaml"), "--listen", FreeAddr(t))
	err := second.Wait(30 * time.Second)
	require.Error(t, err, "the second serve kept running:\n%s", second.Logs())
	logs := second.Logs()
	assert.Contains(t, logs, fmt.Sprintf("agentmeter.db is already open in another process (pid %d)", first.Pid()))
	assert.Contains(t, logs, "to run several gateways on one store use store.driver: postgres")
	code, _ := first.request(t, "GET", "/healthz", "", "")
	assert.Equal(t, 200, code, "the first gateway is unaffected")
}
