// Package childproc holds what the bench programs, the demo and the end-to-end tests
// need to run a collector, a gateway or a load generator as a child process: free
// loopback addresses, a work folder, the process's lifecycle, and the last lines of its
// output for an error message.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// handedOut are the ports FreePort returned: a port just closed can come back from the
// kernel, and two of one process's children must not be given the same.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort is a loopback TCP port that was free a moment ago, never one it returned
// before in this process.
//
// It is picked below the kernel's ephemeral range where that range is known (Linux), so
// that nothing the kernel hands out can take it before the child binds it: a port from
// that range, free when checked, was seen taken a moment later by an HTTP test server or
// an outgoing connection of another test process, and the child could not start.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	lo, hi := fixedRange()
	for range 100 {
		port := 0 // the kernel's choice
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if port != 0 {
				continue // taken: try another
			}
			return 0, fmt.Errorf("free port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[p] {
			handedOut.ports[p] = true
			return p, nil
		}
	}
	return 0, errors.New("free port: no free port found in 100 tries")
}

// fixedPortsFrom is the lowest port FreePort picks from below the ephemeral range: above
// the ports services are commonly configured on.
const fixedPortsFrom = 10000

// fixedRange is [fixedPortsFrom, start of the kernel's ephemeral range), or an empty
// range when the kernel does not say (FreePort then takes the kernel's choice).
func fixedRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start-fixedPortsFrom < 1000 {
		return 0, 0
	}
	return fixedPortsFrom, start
}

// FreeAddr is 127.0.0.1 with a FreePort.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

// WorkDir returns dir when it is set, else a new temporary folder named with prefix and
// a cleanup that removes it (a no-op for a given dir, which is the caller's).
func WorkDir(dir, prefix string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("work dir: %w", err)
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Tail is the last n lines of the file at path ("" when it cannot be read).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return LastLines(string(b), n)
}

// VendorEnv are the prefixes of the variables that switch the vendor exporters on and
// configure them (keys, endpoints, projects): a collector a bench or test starts must
// not inherit the developer's.
var VendorEnv = []string{"LANGSMITH_", "LANGFUSE_", "LANGCHAIN_"}

// EnvWithout is this process's environment without the variables whose names start with
// one of prefixes (a vendor key in the developer's shell must not switch an exporter on).
func EnvWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return env
}

// Process is a started child process that does not outlive this one (it gets SIGKILL
// when the parent dies).
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts cmd as a Process.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Done is closed once the child is gone; Err is then its exit status.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill ends the child with SIGKILL, as a crash would, and waits until it is gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Err is the child's exit status, once Done is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Stop asks the child to end (SIGTERM), kills it when it has not within grace, and
// returns once it is gone (at once for a child already gone). It reports whether the
// child had to be killed.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return false
	case <-time.After(grace):
		p.Kill()
		return true
	}
}

// WaitReady polls ready every 100 ms until it reports true; it fails when the child
// exits first, ctx ends or timeout passes.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("exited at start: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if ready() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s", timeout)
}

// Listening reports whether addr accepts TCP connections.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// AnswersOK reports whether a GET of url answers 200.
func AnswersOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
