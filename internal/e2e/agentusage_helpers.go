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

// SDKDir holds the node project with the real vendor SDKs (test/sdk).
func SDKDir() string { return filepath.Join(RepoRoot(), "test", "sdk") }

var npmOnce sync.Once

// EnsureSDKs makes sure test/sdk/node_modules exists, running `npm ci` (under a file
// lock, once per test process) when it does not. A machine without node or npm fails
// the test: the SDK tests are the proof that real clients work, never skipped.
func EnsureSDKs(t testing.TB) {
	t.Helper()
	var err error
	npmOnce.Do(func() {
		if _, statErr := os.Stat(filepath.Join(SDKDir(), "node_modules", "langsmith", "package.json")); statErr == nil {
			return
		}
		lock, lerr := os.OpenFile(filepath.Join(os.TempDir(), "agentmeter-npm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if lerr != nil {
			err = lerr
			return
		}
		defer lock.Close()
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = SDKDir()
		out, cerr := cmd.CombinedOutput()
		if cerr != nil {
			err = fmt.Errorf("npm ci in %s: %w\n%s", SDKDir(), cerr, out)
		}
	})
	if err != nil {
		t.Fatalf("installing the vendor SDKs: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(SDKDir(), "node_modules", "langsmith", "package.json")); statErr != nil {
		t.Fatalf("test/sdk/node_modules is missing after npm ci: %v", statErr)
	}
}

// RunNode runs one script of test/sdk with extra environment variables and returns
// its standard output; a non-zero exit fails the test with the script's output.
func RunNode(t testing.TB, script string, env ...string) string {
	t.Helper()
	EnsureSDKs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = SDKDir()
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// SpanTree indexes spans by id for tree assertions.
type SpanTree struct {
	ByID map[string]ptrace.Span
}

// NewSpanTree indexes spans; a span id seen twice keeps the last copy.
func NewSpanTree(spans []ptrace.Span) SpanTree {
	tr := SpanTree{ByID: map[string]ptrace.Span{}}
	for _, s := range spans {
		tr.ByID[s.SpanID().String()] = s
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
