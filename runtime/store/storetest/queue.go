package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/store"
)

// t0 is the queue tests' clock origin; leases are explicit times, so no test sleeps.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func admit(t *testing.T, s store.RunStore, thread, runID string, enqueue bool) error {
	t.Helper()
	return s.AdmitRun(ctx, store.Run{RunID: runID, ThreadID: thread, Input: `{"content":"` + runID + `"}`}, enqueue, "", time.Time{})
}

func claim(t *testing.T, s store.RunStore, owner string, until time.Time) (store.Run, bool) {
	t.Helper()
	r, ok, err := s.ClaimRun(ctx, owner, until, store.ClaimFilter{})
	must(t, err)
	return r, ok
}

func wantClaim(t *testing.T, s store.RunStore, owner string, until time.Time, want string) store.Run {
	t.Helper()
	r, ok := claim(t, s, owner, until)
	if want == "" {
		if ok {
			t.Fatalf("%s claimed %s, want nothing", owner, r.RunID)
		}
		return r
	}
	if !ok || r.RunID != want {
		t.Fatalf("%s claimed %q (ok %v), want %s", owner, r.RunID, ok, want)
	}
	if r.Status != store.StatusRunning || r.LeaseOwner != owner {
		t.Fatalf("claimed run = status %s owner %q, want running by %s", r.Status, r.LeaseOwner, owner)
	}
	return r
}

func complete(t *testing.T, s store.RunStore, runID string) {
	t.Helper()
	ok, err := s.UpdateRunCompletion(ctx, runID, store.Completion{Status: store.StatusSuccess})
	must(t, err)
	if !ok {
		t.Fatalf("completing %s changed no row", runID)
	}
}

func testAdmitRejectAndEnqueue(t *testing.T, s store.RunStore) {
	must(t, admit(t, s, "t", "r1", false))
	err := admit(t, s, "t", "r2", false)
	var busy *store.BusyError
	if !errors.As(err, &busy) || busy.RunID != "r1" || busy.ThreadID != "t" {
		t.Fatalf("second run with reject = %v, want BusyError naming r1", err)
	}
	if _, err := s.GetRun(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a rejected run left a row: %v", err)
	}
	must(t, admit(t, s, "t", "r2", true))
	must(t, admit(t, s, "other", "o1", false)) // another thread is free
	r, err := s.GetRun(ctx, "r1")
	must(t, err)
	if r.Status != store.StatusPending || r.Input != `{"content":"r1"}` {
		t.Fatalf("admitted run = %+v", r)
	}
	// Running still counts as busy; a final run frees the thread.
	wantClaim(t, s, "A", t0.Add(time.Minute), "r1")
	if err := admit(t, s, "t", "r3", false); !errors.As(err, &busy) {
		t.Fatalf("reject while running = %v", err)
	}
	complete(t, s, "r1")
	if err := admit(t, s, "t", "r3", false); !errors.As(err, &busy) || busy.RunID != "r2" {
		t.Fatalf("reject while r2 queued = %v, want BusyError naming r2", err)
	}
}

func testClaimOrder(t *testing.T, s store.RunStore) {
	lease := t0.Add(time.Minute)
	for _, id := range []string{"a1", "a2", "a3"} {
		must(t, admit(t, s, "a", id, true))
	}
	must(t, admit(t, s, "b", "b1", true))
	// Narrow claims: a run that is not its thread's next is not taken.
	for _, f := range []store.ClaimFilter{{RunID: "a2"}, {RunID: "missing"}, {ThreadID: "none"}} {
		if r, ok, err := s.ClaimRun(ctx, "A", lease, f); err != nil || ok {
			t.Fatalf("claim %+v = %s, %v, %v; want nothing", f, r.RunID, ok, err)
		}
	}
	if r, ok, err := s.ClaimRun(ctx, "A", lease, store.ClaimFilter{ThreadID: "b"}); err != nil || !ok || r.RunID != "b1" {
		t.Fatalf("claim of thread b = %s, %v, %v", r.RunID, ok, err)
	}
	complete(t, s, "b1")
	must(t, admit(t, s, "b", "b1-next", true))
	if r, ok, err := s.ClaimRun(ctx, "A", lease, store.ClaimFilter{RunID: "a1"}); err != nil || !ok || r.RunID != "a1" {
		t.Fatalf("claim of run a1 = %s, %v, %v", r.RunID, ok, err)
	}
	complete(t, s, "a1")
	must(t, admit(t, s, "a", "a4", true))           // a's line: a2 a3 a4
	for _, id := range []string{"a2", "a3", "a4"} { // b1-next is older but not a's
		r, ok, err := s.ClaimRun(ctx, "A", lease, store.ClaimFilter{ThreadID: "a"})
		if err != nil || !ok || r.RunID != id {
			t.Fatalf("claim of thread a = %s, %v, %v; want %s", r.RunID, ok, err, id)
		}
		complete(t, s, id)
	}
	must(t, admit(t, s, "b", "b2", true)) // b's line: b1-next b2
	for _, id := range []string{"a1", "a2", "a3"} {
		must(t, admit(t, s, "a", id+"-2", true))
	}
	wantClaim(t, s, "A", lease, "b1-next")
	wantClaim(t, s, "B", lease, "a1-2") // b is busy: the next free thread's run
	wantClaim(t, s, "B", lease, "")
	complete(t, s, "a1-2")
	wantClaim(t, s, "B", lease, "a2-2") // any process takes the thread's next run
	wantClaim(t, s, "A", lease, "")
	complete(t, s, "a2-2")
	complete(t, s, "b1-next")
	wantClaim(t, s, "A", lease, "b2") // admitted before a3-2
	wantClaim(t, s, "A", lease, "a3-2")
	wantClaim(t, s, "A", lease, "")
}

func testNotReadyRunHoldsItsPlace(t *testing.T, s store.RunStore) {
	must(t, s.AdmitRun(ctx, store.Run{RunID: "files", ThreadID: "t"}, false, "A", t0.Add(time.Minute)))
	must(t, admit(t, s, "t", "next", true))
	wantClaim(t, s, "B", t0.Add(time.Minute), "") // neither the unready run nor the one after it
	ok, err := s.SetRunInput(ctx, "files", `{"content":"with files"}`)
	must(t, err)
	if !ok {
		t.Fatal("SetRunInput changed no row")
	}
	r := wantClaim(t, s, "B", t0.Add(time.Minute), "files")
	if r.Input != `{"content":"with files"}` {
		t.Fatalf("claimed input = %q", r.Input)
	}
	if _, err := s.SetRunInput(ctx, "files", "x"); err != nil {
		t.Fatal(err)
	}
	// An admitting process that died leaves a run that expires like a running one.
	must(t, s.AdmitRun(ctx, store.Run{RunID: "orphan", ThreadID: "u"}, false, "C", t0))
	ids, err := s.ExpireLeases(ctx, t0.Add(time.Second), "lease expired")
	must(t, err)
	if len(ids) != 1 || ids[0] != "orphan" {
		t.Fatalf("expired %v, want [orphan]", ids)
	}
}

func testLeases(t *testing.T, s store.RunStore) {
	for _, id := range []string{"r1", "r2"} {
		must(t, admit(t, s, "t", id, true))
	}
	must(t, admit(t, s, "u", "u1", true))
	wantClaim(t, s, "A", t0.Add(10*time.Second), "r1")
	wantClaim(t, s, "B", t0.Add(10*time.Second), "u1")
	// B renews; A does not (it died).
	leases, err := s.RenewLeases(ctx, "B", t0.Add(30*time.Second))
	must(t, err)
	if len(leases) != 1 || leases[0].RunID != "u1" || leases[0].CancelRequested {
		t.Fatalf("B's leases = %+v", leases)
	}
	ids, err := s.ExpireLeases(ctx, t0.Add(5*time.Second), "lease expired")
	must(t, err)
	if len(ids) != 0 {
		t.Fatalf("expired %v before any lease ended", ids)
	}
	ids, err = s.ExpireLeases(ctx, t0.Add(11*time.Second), "the gateway executing the run stopped renewing its lease")
	must(t, err)
	if len(ids) != 1 || ids[0] != "r1" {
		t.Fatalf("expired %v, want [r1]", ids)
	}
	r, err := s.GetRun(ctx, "r1")
	must(t, err)
	if r.Status != store.StatusError || r.Error != "the gateway executing the run stopped renewing its lease" || r.FinishedAt == nil {
		t.Fatalf("expired run = %+v", r)
	}
	// The thread is free: another process takes the next run. A late completion of the
	// expired run changes nothing, and A no longer holds it.
	wantClaim(t, s, "B", t0.Add(30*time.Second), "r2")
	ok, err := s.UpdateRunCompletion(ctx, "r1", store.Completion{Status: store.StatusSuccess})
	must(t, err)
	if ok {
		t.Fatal("a late success overwrote the expired run")
	}
	if leases, _ := s.RenewLeases(ctx, "A", t0.Add(time.Minute)); len(leases) != 0 {
		t.Fatalf("A still holds %+v", leases)
	}
}

func testRequestCancel(t *testing.T, s store.RunStore) {
	for _, id := range []string{"r1", "r2", "r3"} {
		must(t, admit(t, s, "t", id, true))
	}
	wantClaim(t, s, "A", t0.Add(time.Minute), "r1")
	for _, c := range []struct {
		run  string
		want store.CancelOutcome
	}{{"r2", store.CancelledPending}, {"r1", store.CancelRequested}, {"missing", store.CancelNotFound}} {
		got, err := s.RequestCancel(ctx, c.run, "run cancelled by request")
		must(t, err)
		if got != c.want {
			t.Fatalf("cancel %s = %v, want %v", c.run, got, c.want)
		}
	}
	if r, _ := s.GetRun(ctx, "r2"); r.Status != store.StatusInterrupted || r.Error != "run cancelled by request" {
		t.Fatalf("cancelled pending run = %+v", r)
	}
	leases, err := s.RenewLeases(ctx, "A", t0.Add(time.Minute))
	must(t, err)
	if len(leases) != 1 || !leases[0].CancelRequested {
		t.Fatalf("leases after cancel = %+v, want r1 with its cancel flag", leases)
	}
	ok, err := s.UpdateRunCompletion(ctx, "r1", store.Completion{Status: store.StatusInterrupted})
	must(t, err)
	if !ok {
		t.Fatal("interrupting r1 changed no row")
	}
	if got, _ := s.RequestCancel(ctx, "r1", "x"); got != store.CancelTooLate {
		t.Fatalf("cancel of a finished run = %v, want CancelTooLate", got)
	}
	wantClaim(t, s, "B", t0.Add(time.Minute), "r3") // the cancelled run was skipped
	done, err := s.FinishedRuns(ctx, []string{"r1", "r2", "r3", "missing"})
	must(t, err)
	wantJSON(t, "finished runs", canonical(t, done), `["r1","r2","missing"]`)
}
