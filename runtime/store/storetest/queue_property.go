package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/store"
)

// queueModel is what the store's line of runs must amount to, kept by the property
// test beside the store: the admitted runs of each thread in order, which have ended,
// and which replica runs which.
type queueModel struct {
	lines   map[string][]string // thread → runs in admission order
	ended   map[string]bool
	running map[string]string // run → replica name
	thread  map[string]string // run → thread
	started map[string][]string
}

func (m *queueModel) busy(thread string) bool {
	for _, id := range m.lines[thread] {
		if !m.ended[id] {
			return true
		}
	}
	return false
}

// head is the thread's first run that has not ended.
func (m *queueModel) head(thread string) string {
	for _, id := range m.lines[thread] {
		if !m.ended[id] {
			return id
		}
	}
	return ""
}

// testQueueProperty drives N replicas through random interleavings of posts (reject or
// enqueue), claims, ends, cancels, crashes, restarts and clock ticks against the store,
// checking after every step: never two runs of one thread running, a claim only ever
// starts a thread's oldest unended run, reject answers busy exactly when the thread has
// a run in progress, only a dead replica's runs expire. At the end every replica is
// alive and the queue drains: no admitted run is left pending.
func testQueueProperty(t *testing.T, s store.RunStore) {
	const (
		replicas = 3
		threads  = 3
		lease    = 10 * time.Second
	)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("AGENTMETER_QUEUE_SEED"); v != "" { // replay a failure
		n, err := strconv.ParseUint(v, 10, 64)
		must(t, err)
		seed = n
	}
	t.Logf("seed %d (AGENTMETER_QUEUE_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	now := t0
	alive := make([]bool, replicas)
	names := make([]string, replicas)
	gen := 0
	restart := func(i int) {
		gen++
		alive[i], names[i] = true, fmt.Sprintf("replica-%d-gen-%d", i, gen)
	}
	for i := range replicas {
		restart(i)
	}
	m := &queueModel{lines: map[string][]string{}, ended: map[string]bool{}, running: map[string]string{}, thread: map[string]string{}, started: map[string][]string{}}
	owners := func(name string) (runs []string) {
		for id, o := range m.running {
			if o == name {
				runs = append(runs, id)
			}
		}
		return runs
	}
	runN := 0
	claimBy := func(i int) bool {
		r, ok, err := s.ClaimRun(ctx, names[i], now.Add(lease), store.ClaimFilter{})
		if err != nil {
			t.Fatalf("seed %d: claim: %v", seed, err)
		}
		if !ok {
			for th := range m.lines {
				if h := m.head(th); h != "" {
					if _, running := m.running[h]; !running {
						t.Fatalf("seed %d: nothing claimed but %s's head %s is free", seed, th, h)
					}
				}
			}
			return false
		}
		th := m.thread[r.RunID]
		if h := m.head(th); h != r.RunID {
			t.Fatalf("seed %d: claimed %s of %s; the thread's next run is %s", seed, r.RunID, th, h)
		}
		if _, dup := m.running[r.RunID]; dup {
			t.Fatalf("seed %d: %s claimed twice", seed, r.RunID)
		}
		m.running[r.RunID] = names[i]
		m.started[th] = append(m.started[th], r.RunID)
		return true
	}
	end := func(id string, status store.Status) {
		ok, err := s.UpdateRunCompletion(ctx, id, store.Completion{Status: status})
		if err != nil || !ok {
			t.Fatalf("seed %d: completing %s = %v, %v", seed, id, ok, err)
		}
		delete(m.running, id)
		m.ended[id] = true
	}
	tick := func(d time.Duration) {
		now = now.Add(d)
		for i := range replicas {
			if !alive[i] {
				continue
			}
			leases, err := s.RenewLeases(ctx, names[i], now.Add(lease))
			if err != nil {
				t.Fatalf("seed %d: renew: %v", seed, err)
			}
			if len(leases) != len(owners(names[i])) {
				t.Fatalf("seed %d: %s renewed %d leases, holds %d", seed, names[i], len(leases), len(owners(names[i])))
			}
		}
		ids, err := s.ExpireLeases(ctx, now, "lease expired")
		if err != nil {
			t.Fatalf("seed %d: expire: %v", seed, err)
		}
		for _, id := range ids {
			o, ok := m.running[id]
			if !ok {
				t.Fatalf("seed %d: expired %s, which is not running", seed, id)
			}
			for i := range replicas {
				if names[i] == o && alive[i] {
					t.Fatalf("seed %d: expired %s of live %s", seed, id, o)
				}
			}
			delete(m.running, id)
			m.ended[id] = true
		}
	}
	check := func(step int) {
		for th := range m.lines {
			runs, err := s.ListRuns(ctx, th)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range runs {
				if r.Status == store.StatusRunning {
					n++
				}
				if r.Status.Final() != m.ended[r.RunID] {
					t.Fatalf("seed %d step %d: %s is %s in the store; model ended=%v", seed, step, r.RunID, r.Status, m.ended[r.RunID])
				}
			}
			if n > 1 {
				t.Fatalf("seed %d step %d: thread %s has %d runs running", seed, step, th, n)
			}
		}
	}
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 3: // post
			th := fmt.Sprintf("t%d", rng.IntN(threads))
			runN++
			id := fmt.Sprintf("run-%03d", runN)
			enqueue := rng.IntN(2) == 0
			err := s.AdmitRun(ctx, store.Run{RunID: id, ThreadID: th, Input: "{}"}, enqueue, "", time.Time{})
			var busy *store.BusyError
			switch {
			case err == nil:
				if !enqueue && m.busy(th) {
					t.Fatalf("seed %d: reject admitted %s on busy %s", seed, id, th)
				}
				m.lines[th] = append(m.lines[th], id)
				m.thread[id] = th
			case errors.As(err, &busy):
				if enqueue || !m.busy(th) {
					t.Fatalf("seed %d: %s refused as busy (enqueue %v, model busy %v)", seed, id, enqueue, m.busy(th))
				}
			default:
				t.Fatalf("seed %d: admit: %v", seed, err)
			}
		case op < 5: // a live replica claims
			if i := rng.IntN(replicas); alive[i] {
				claimBy(i)
			}
		case op < 7: // a live replica ends one of its runs
			i := rng.IntN(replicas)
			if runs := owners(names[i]); alive[i] && len(runs) > 0 {
				end(runs[rng.IntN(len(runs))], store.StatusSuccess)
			}
		case op < 8: // cancel a random admitted run
			if runN == 0 {
				continue
			}
			id := fmt.Sprintf("run-%03d", 1+rng.IntN(runN))
			out, err := s.RequestCancel(ctx, id, "cancelled")
			if err != nil {
				t.Fatal(err)
			}
			if out == store.CancelledPending {
				if m.ended[id] || m.running[id] != "" {
					t.Fatalf("seed %d: cancel interrupted %s, which is not pending", seed, id)
				}
				m.ended[id] = true
			}
		case op < 9: // crash or restart
			i := rng.IntN(replicas)
			if alive[i] {
				alive[i] = false
			} else {
				restart(i)
			}
		default:
			tick(time.Duration(rng.IntN(6)) * time.Second)
		}
		check(step)
	}
	// Everyone back; time passes so dead replicas' leases expire; the line drains.
	for i := range replicas {
		if !alive[i] {
			restart(i)
		}
	}
	tick(lease + time.Second)
	for progress := true; progress; {
		progress = false
		for i := range replicas {
			if claimBy(i) {
				progress = true
			}
			for _, id := range owners(names[i]) {
				end(id, store.StatusSuccess)
				progress = true
			}
		}
	}
	check(-1)
	for th, line := range m.lines {
		for _, id := range line {
			if !m.ended[id] {
				t.Fatalf("seed %d: %s of %s lost: never ended", seed, id, th)
			}
		}
		// Runs started in admission order.
		pos := map[string]int{}
		for i, id := range line {
			pos[id] = i
		}
		for k := 1; k < len(m.started[th]); k++ {
			if pos[m.started[th][k]] < pos[m.started[th][k-1]] {
				t.Fatalf("seed %d: %s started %v, out of admission order %v", seed, th, m.started[th], line)
			}
		}
	}
}

// testQueueConcurrent runs replicas as goroutines claiming and ending runs for real
// while a poster enqueues runs on a few threads: no two runs of a thread ever execute at
// once, each thread's runs execute in the order admitted, and all of them execute.
func testQueueConcurrent(t *testing.T, s store.RunStore) {
	const (
		replicas = 4
		threads  = 3
		perTh    = 8
	)
	lease := time.Now().Add(time.Hour)
	var (
		mu        sync.Mutex
		executing = map[string]string{}
		order     = map[string][]string{}
		failures  []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("replica-%d", i)
			for {
				r, ok, err := s.ClaimRun(ctx, owner, lease, store.ClaimFilter{})
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				if !ok {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				mu.Lock()
				if other := executing[r.ThreadID]; other != "" {
					failures = append(failures, fmt.Sprintf("%s started while %s of thread %s executes", r.RunID, other, r.ThreadID))
				}
				executing[r.ThreadID] = r.RunID
				order[r.ThreadID] = append(order[r.ThreadID], r.RunID)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				delete(executing, r.ThreadID)
				mu.Unlock()
				if _, err := s.UpdateRunCompletion(ctx, r.RunID, store.Completion{Status: store.StatusSuccess}); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	admitted := map[string][]string{}
	for k := range perTh {
		for th := range threads {
			id := fmt.Sprintf("c%d-%02d", th, k)
			tid := fmt.Sprintf("ct%d", th)
			must(t, s.AdmitRun(ctx, store.Run{RunID: id, ThreadID: tid, Input: "{}"}, true, "", time.Time{}))
			admitted[tid] = append(admitted[tid], id)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, o := range order {
			n += len(o)
		}
		mu.Unlock()
		if n == threads*perTh || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, first: %s", len(failures), failures[0])
	}
	for tid, want := range admitted {
		if fmt.Sprint(order[tid]) != fmt.Sprint(want) {
			t.Fatalf("thread %s executed %v, want %v", tid, order[tid], want)
		}
	}
}
