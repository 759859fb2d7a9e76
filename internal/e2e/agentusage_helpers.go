//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// nodeProject is a node project under test/ whose dependencies `npm ci` installs on first
// use: test/sdk (the real vendor SDKs) and test/interop (the agent frameworks and
// instrumentations).
type nodeProject struct {
	name   string // folder under test/
	marker string // a file under node_modules that npm ci leaves
	once   sync.Once
	err    error
}

var (
	sdkProject     = &nodeProject{name: "sdk", marker: filepath.Join("langsmith", "package.json")}
	interopProject = &nodeProject{name: "interop", marker: filepath.Join("openai", "package.json")}
)

func (p *nodeProject) dir() string { return filepath.Join(RepoRoot(), "test", p.name) }

func (p *nodeProject) installed() bool {
	_, err := os.Stat(filepath.Join(p.dir(), "node_modules", p.marker))
	return err == nil
}

// ensure makes sure the project's node_modules exists, running `npm ci` (under one file
// lock for every project and test process, once per test process) when it does not. A
// machine without node or npm fails the test: these tests are the proof that real
// clients and libraries work, so they never skip.
func (p *nodeProject) ensure(t testing.TB) {
	t.Helper()
	p.once.Do(func() {
		if p.installed() {
			return
		}
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), "agentmeter-npm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			p.err = err
			return
		}
		defer lock.Close()
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		if p.installed() {
			return // another test process installed it while we waited
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = p.dir()
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("npm ci in %s: %w\n%s", p.dir(), err, out)
		}
	})
	if p.err != nil {
		t.Fatalf("installing test/%s (node and npm are required; scripts/test-deps.sh installs them): %v", p.name, p.err)
	}
	if !p.installed() {
		t.Fatalf("test/%s/node_modules is missing after npm ci", p.name)
	}
}

// run runs one script of the project with env added to the environment, within timeout,
// and returns its standard output and standard error; a non-zero exit fails the test with
// both.
func (p *nodeProject) run(t testing.TB, timeout time.Duration, script string, env ...string) (stdout, stderr string) {
	t.Helper()
	p.ensure(t)
	stdout, stderr, err := p.exec(timeout, script, env...)
	if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr
}

// exec runs one script of the installed project (ensure first) and returns its output;
// a non-zero exit is an error holding both streams. It uses no testing.TB, so a test can
// run a script in a goroutine of its own.
func (p *nodeProject) exec(timeout time.Duration, script string, env ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = p.dir()
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("node %s: %w\nstdout:\n%s\nstderr:\n%s", script, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), nil
}

// RunNode runs one script of test/sdk with extra environment variables and returns
// its standard output; a non-zero exit fails the test with the script's output.
func RunNode(t testing.TB, script string, env ...string) string {
	t.Helper()
	out, _ := sdkProject.run(t, 60*time.Second, script, env...)
	return out
}

// SpanTree indexes spans by id for tree assertions.
type SpanTree struct {
	ByID map[string]ptrace.Span
}

// NewSpanTree indexes spans; a span id seen twice keeps its newest version (Supersedes).
func NewSpanTree(spans []ptrace.Span) SpanTree {
	tr := SpanTree{ByID: map[string]ptrace.Span{}}
	for _, s := range spans {
		id := s.SpanID().String()
		if old, ok := tr.ByID[id]; !ok || Supersedes(s, old) {
			tr.ByID[id] = s
		}
	}
	return tr
}

// Parent returns a span's parent, if present.
func (tr SpanTree) Parent(s ptrace.Span) (ptrace.Span, bool) {
	p, ok := tr.ByID[s.ParentSpanID().String()]
	return p, ok
}

// Named returns the spans with the given name.
func (tr SpanTree) Named(name string) []ptrace.Span {
	var out []ptrace.Span
	for _, s := range tr.ByID {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Str reads a string attribute ("" when absent).
func Str(s ptrace.Span, key string) string {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

// Int reads an integer attribute (-1 when absent).
func Int(s ptrace.Span, key string) int64 {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return -1
	}
	return v.Int()
}

// OwnUsageSum adds up the own usage of every chat span (docs/contract.md#usage).
func (tr SpanTree) OwnUsageSum() genai.Usage {
	var sum genai.Usage
	for _, s := range tr.ByID {
		if u, ok := genai.UsageFromMap(s.Attributes()); ok && Str(s, genai.AttrOperationName) == genai.OpChat {
			sum = sum.Add(u)
		}
	}
	return sum
}
