package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/postgres"
)

// twoReplicas serves two gateways on one PostgreSQL database, each with its own
// connection pool, as two processes would.
func twoReplicas(t *testing.T, cfg Config) (*threadEnv, *threadEnv) {
	t.Helper()
	dsn := postgresServer(t).NewDatabase(t)
	open := func() store.RunStore {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	return newThreadEnv(t, cfg, open()), newThreadEnv(t, cfg, open())
}

func TestReplicasRejectAndEnqueueAcrossGateways(t *testing.T) {
	a, b := twoReplicas(t, Config{PollInterval: 20 * time.Millisecond})
	first := decodeRun(t, a.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember 1"}`, 202, ""))
	// The thread is busy on a: b answers 409 naming a's run.
	b.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember 2"}`, 409,
		detail(busyMessage("t1", first.RunID)))
	// Enqueued on b, waited on b: it runs after the first, continuing it.
	second := decodeRun(t, b.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"remember 2","multitask_strategy":"enqueue"}`, 200, ""))
	if second.Status != store.StatusSuccess || second.Usage.LastAIMessage != "answer 2" {
		t.Fatalf("second run = %+v", second)
	}
	if r, _ := a.store.GetRun(context.Background(), first.RunID); r.Status != store.StatusSuccess || r.FinishedAt == nil || r.FinishedAt.After(second.UpdatedAt) {
		t.Fatalf("first run = %+v, second updated at %s", r, second.UpdatedAt)
	}
	reqs := append(a.model.requests(), b.model.requests()...)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests over both gateways, want 2", len(reqs))
	}
	for _, req := range reqs {
		if h := humans(req); len(h) == 2 && strings.Join(h, "|") != "remember 1|remember 2" {
			t.Fatalf("second request's humans = %q", h)
		}
	}
}

func TestReplicaCancelReachesTheExecutingGateway(t *testing.T) {
	a, b := twoReplicas(t, Config{PollInterval: 20 * time.Millisecond, LeaseTimeout: 3 * time.Second})
	run := decodeRun(t, a.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"be slow"}`, 202, ""))
	waitStatus(t, a.store, run.RunID, store.StatusRunning)
	// The posting gateway starts the run on a free thread, unless the other one's poll
	// took it first: cancel through the gateway not executing it.
	other := b
	if b.srv.activeRun(run.RunID) != nil {
		other = a
	}
	start := time.Now()
	got := decodeRun(t, other.expect(t, "POST", "/api/threads/t1/runs/"+run.RunID+"/cancel", "alice-key", "", 202, ""))
	if got.Status != store.StatusInterrupted || got.Error != errCancelled.Error() {
		t.Fatalf("cancelled through the other gateway = %+v", got)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("cancel through the store took %s", took)
	}
}

func TestDeadGatewaysRunEndsAndTheNextStarts(t *testing.T) {
	e := newThreadEnv(t, Config{MultitaskStrategy: MultitaskEnqueue, LeaseTimeout: time.Second, PollInterval: 20 * time.Millisecond}, nil)
	ctx := context.Background()
	// Another gateway admitted and claimed a run, then died: its lease runs out.
	if err := e.store.AdmitRun(ctx, store.Run{RunID: "run-dead", ThreadID: "t1", Input: `{"type":"human","content":"remember 1"}`}, false, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.store.ClaimRun(ctx, "dead-gateway", time.Now().Add(time.Second), store.ClaimFilter{}); !ok || err != nil {
		t.Fatalf("claim as the dead gateway: %v %v", ok, err)
	}
	next := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"remember 2"}`, 200, ""))
	dead, err := e.store.GetRun(ctx, "run-dead")
	if err != nil {
		t.Fatal(err)
	}
	if dead.Status != store.StatusError || !strings.Contains(dead.Error, "stopped renewing its lease for gateway.lease_timeout (1s)") {
		t.Fatalf("dead gateway's run = %+v", dead)
	}
	if next.Status != store.StatusSuccess || dead.FinishedAt == nil || dead.FinishedAt.After(next.UpdatedAt) {
		t.Fatalf("next run = %+v (dead run finished %v)", next, dead.FinishedAt)
	}
}

func TestStateSavedSinceTheLoadFailsTheRun(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"brief one"}`, 202, ""))
	// Once the model is called the run has loaded the state; someone outside the line
	// of runs saves the thread's state meanwhile.
	for deadline := time.Now().Add(10 * time.Second); len(e.model.requests()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never called the model")
		}
	}
	if _, err := e.store.SaveThreadState(context.Background(), "t1", state.State{Title: "theirs"}, 0); err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, e.store, run.RunID, store.StatusError)
	if !strings.Contains(got.Error, "saved by another run since this run loaded it") {
		t.Fatalf("run = %+v", got)
	}
	st, _, _ := e.store.LoadThreadState(context.Background(), "t1")
	if st.Title != "theirs" || len(st.Messages) != 0 {
		t.Fatalf("state = %+v, want the other save kept", st)
	}
}

func waitStatus(t *testing.T, st store.RunStore, runID string, want store.Status) store.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := st.GetRun(context.Background(), runID)
		if err == nil && r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s = %+v, %v; want %s", runID, r, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamOnTheOtherReplica: the stream of a run another gateway executed is rebuilt
// from the store with the same messages and usage as the executing gateway's.
func TestStreamOnTheOtherReplica(t *testing.T) {
	a, b := twoReplicas(t, Config{PollInterval: 20 * time.Millisecond})
	run := decodeRun(t, a.expect(t, "POST", "/api/threads/t1/runs?wait=true", "alice-key", `{"input":"uploaded nothing"}`, 200, ""))
	if run.Status != store.StatusSuccess {
		t.Fatalf("run = %+v", run)
	}
	path := "/api/threads/t1/runs/" + run.RunID + "/stream"
	executing, other := a, b
	if a.srv.lookup(run.RunID) == nil {
		executing, other = b, a
	}
	here, there := readSSE(t, executing.env, path), readSSE(t, other.env, path)
	names := func(evs []event) (out []string) {
		for _, e := range evs {
			out = append(out, e.name)
		}
		return out
	}
	if got, want := strings.Join(names(there), ","), strings.Join(names(here), ","); got != want || !strings.HasPrefix(got, "metadata,messages") {
		t.Fatalf("other replica's events %s, executing replica's %s", got, want)
	}
	for i := range here {
		h, o := here[i].data, there[i].data
		if here[i].name == "end" {
			if o["source"] != "store" || h["source"] != nil {
				t.Fatalf("end sources: executing %v, other %v", h["source"], o["source"])
			}
			delete(o, "source")
		}
		if hb, ob := mustJSON(t, h), mustJSON(t, o); hb != ob {
			t.Errorf("event %d (%s):\nexecuting %s\nother     %s", i, here[i].name, hb, ob)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
