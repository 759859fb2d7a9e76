//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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

// RunAgentJSON runs `agentmeter run --json args...` (flags, then the prompt) with env
// added to the test's environment (e.g. OTEL_EXPORTER_OTLP_ENDPOINT), bounded by a
// minute. It requires exit 0, decodes stdout into out and returns what the run wrote on
// stderr.
func RunAgentJSON(t testing.TB, env []string, out any, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, AgentmeterBinary(t), append([]string{"run", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "agentmeter run --json %s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out), "stdout:\n%s", stdout.String())
	return stderr.String()
}
