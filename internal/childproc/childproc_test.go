package childproc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreeAddrAndPortAreLoopbackAndListenable(t *testing.T) {
	a, err := FreeAddr()
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(a)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	l, err := net.Listen("tcp", a)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	p, err := FreePort()
	require.NoError(t, err)
	assert.Positive(t, p)
}

// Where the kernel names its ephemeral range, FreePort stays below it, so no port the
// kernel hands out (a test server's, an outgoing connection's) can take it first; and it
// never returns a port twice.
func TestFreePortBelowTheEphemeralRange(t *testing.T) {
	lo, hi := fixedRange()
	if hi == 0 {
		t.Skip("the kernel does not name its ephemeral range here")
	}
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, p, lo)
		assert.Less(t, p, hi)
		assert.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}

func TestWorkDir(t *testing.T) {
	given := t.TempDir()
	d, done, err := WorkDir(given, "x-")
	require.NoError(t, err)
	assert.Equal(t, given, d)
	done()
	assert.DirExists(t, given, "a given folder is the caller's")

	d, done, err = WorkDir("", "childproc-test-")
	require.NoError(t, err)
	assert.DirExists(t, d)
	assert.Contains(t, filepath.Base(d), "childproc-test-")
	done()
	_, err = os.Stat(d)
	assert.True(t, os.IsNotExist(err))
}

func TestLastLinesAndTail(t *testing.T) {
	assert.Equal(t, "c\nd", LastLines("a\nb\nc\nd\n", 2))
	assert.Equal(t, "a\nb", LastLines("a\nb", 5))
	assert.Equal(t, "", LastLines("", 3))
	path := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(path, []byte("1\n2\n3\n"), 0o600))
	assert.Equal(t, "2\n3", Tail(path, 2))
	assert.Equal(t, "", Tail(filepath.Join(t.TempDir(), "none"), 2))
}

func TestEnvWithout(t *testing.T) {
	t.Setenv("CHILDPROC_TEST_DROP", "x")
	t.Setenv("CHILDPROC_KEEP", "y")
	env := EnvWithout("CHILDPROC_TEST_")
	assert.NotContains(t, env, "CHILDPROC_TEST_DROP=x")
	assert.Contains(t, env, "CHILDPROC_KEEP=y")
}

func TestProcessStopEndsTheChild(t *testing.T) {
	p, err := Start(exec.Command("sleep", "30"))
	require.NoError(t, err)
	assert.False(t, p.Stop(5*time.Second), "SIGTERM ends sleep without the kill")
	assert.Error(t, p.Err(), "ended by a signal")
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
}

func TestProcessKilledAfterGrace(t *testing.T) {
	// a child that ignores SIGTERM: only the kill after the grace period ends it
	p, err := Start(exec.Command("sh", "-c", "trap '' TERM; exec sleep 30"))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // the trap is set
	start := time.Now()
	assert.True(t, p.Stop(300*time.Millisecond), "killed after the grace")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestStartErrorIsReturned(t *testing.T) {
	_, err := Start(exec.Command(filepath.Join(t.TempDir(), "no-such-binary")))
	assert.Error(t, err)
}

func TestWaitReady(t *testing.T) {
	p, err := Start(exec.Command("sleep", "30"))
	require.NoError(t, err)
	defer p.Stop(time.Second)
	calls := 0
	require.NoError(t, p.WaitReady(context.Background(), 10*time.Second, func() bool { calls++; return calls == 3 }))
	assert.Equal(t, 3, calls)
	assert.ErrorContains(t, p.WaitReady(context.Background(), 150*time.Millisecond, func() bool { return false }), "not ready after")

	gone, err := Start(exec.Command("sh", "-c", "exit 3"))
	require.NoError(t, err)
	<-gone.Done()
	assert.ErrorContains(t, gone.WaitReady(context.Background(), 10*time.Second, func() bool { return false }), "exited at start: exit status 3")
}

func TestListeningAndAnswersOK(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	assert.True(t, Listening(srv.Listener.Addr().String()))
	assert.True(t, AnswersOK(srv.URL+"/ok"))
	assert.False(t, AnswersOK(srv.URL+"/missing"), "a 404 is not ready")
	port, err := FreePort()
	require.NoError(t, err)
	assert.False(t, Listening(fmt.Sprintf("127.0.0.1:%d", port)))
}
