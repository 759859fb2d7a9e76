package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// StartWithArgs runs the collector with arbitrary command-line arguments (several
// --config files merged, feature gates), in dir, and waits until ready accepts
// connections. Lifecycle and log handling are those of Start.
func StartWithArgs(t testing.TB, dir, ready string, args ...string) *Collector {
	t.Helper()
	bin := CollectorBinary(t)
	c := &Collector{t: t, Dir: dir, logs: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Dir = dir
	c.cmd.Stdout = c.logs
	c.cmd.Stderr = c.logs
	c.cmd.Env = os.Environ()
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start collector: %v", err)
	}
	go func() { c.waitErr = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("collector logs:\n%s", c.Logs())
		}
	})
	if ready != "" {
		if err := c.waitTCP(ready, 60*time.Second); err != nil {
			t.Fatalf("collector not ready on %s: %v\nlogs:\n%s", ready, err, c.Logs())
		}
	}
	return c
}

var (
	agentmeterOnce sync.Once
	agentmeterPath string
	agentmeterErr  error
)

// AgentmeterBinary returns the agentmeter CLI: $AGENTMETER_BIN when set (make test builds
// it), otherwise a `go build` of ./cmd/agentmeter into a temp folder, once per process.
func AgentmeterBinary(t testing.TB) string {
	t.Helper()
	agentmeterOnce.Do(func() {
		if p := os.Getenv("AGENTMETER_BIN"); p != "" {
			if _, err := os.Stat(p); err == nil {
				agentmeterPath = p
				return
			}
		}
		dir, err := os.MkdirTemp("", "agentmeter-bin-")
		if err != nil {
			agentmeterErr = err
			return
		}
		agentmeterPath = filepath.Join(dir, "agentmeter")
		cmd := exec.Command("go", "build", "-o", agentmeterPath, "./cmd/agentmeter")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			agentmeterErr = fmt.Errorf("go build ./cmd/agentmeter: %w\n%s", err, out)
		}
	})
	if agentmeterErr != nil {
		t.Fatalf("agentmeter CLI: %v", agentmeterErr)
	}
	return agentmeterPath
}
