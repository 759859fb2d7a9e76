// Package sandbox confines the file and shell tools to one thread's workspace
// (DeerFlow's sandbox provider, local flavour). Every path a tool receives goes through
// Resolve, which maps it into the workspace and refuses anything that would leave it —
// "..", absolute paths outside the root, and symlinks pointing outside.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Sandbox is what the tools use. Implementations must be safe for concurrent use
// (parallel tool calls share one).
type Sandbox interface {
	// ID is the sandbox id stored in the thread state.
	ID() string
	// Root is the absolute workspace path.
	Root() string
	// Resolve maps a tool-supplied path (relative to the workspace, or absolute under
	// the virtual root "/workspace" or the real root) to an absolute path inside the
	// workspace, or returns an error wrapping ErrOutside.
	Resolve(path string) (string, error)
	// Exec runs a shell command with the workspace as working directory, bounded by
	// timeout and ctx, returning combined output and the exit code.
	Exec(ctx context.Context, command string, timeout time.Duration) (output string, exitCode int, err error)
}

// ErrOutside is returned for paths that leave the workspace.
var ErrOutside = errors.New("path is outside the thread workspace")

// VirtualRoot is the workspace path as the model sees it (DeerFlow's /mnt/user-data
// idea): "/workspace/x" means "<root>/x".
const VirtualRoot = "/workspace"

// Local is a Sandbox on the local file system.
type Local struct {
	id   string
	root string
}

// NewLocal creates (if needed) and returns the workspace root/<threadID>. The thread id
// must be a single path element.
func NewLocal(root, threadID string) (*Local, error) {
	if threadID == "" || threadID != filepath.Base(threadID) || threadID == "." || threadID == ".." {
		return nil, fmt.Errorf("sandbox: invalid thread id %q", threadID)
	}
	dir := filepath.Join(root, threadID, "workspace")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: create workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: resolve workspace: %w", err)
	}
	return &Local{id: "local:" + threadID, root: real}, nil
}

func (l *Local) ID() string   { return l.id }
func (l *Local) Root() string { return l.root }

// Resolve implements Sandbox.
func (l *Local) Resolve(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" {
		p = "."
	}
	var abs string
	switch {
	case p == VirtualRoot || strings.HasPrefix(p, VirtualRoot+"/"):
		abs = filepath.Join(l.root, strings.TrimPrefix(p, VirtualRoot))
	case filepath.IsAbs(p):
		abs = filepath.Clean(p)
	default:
		abs = filepath.Join(l.root, p)
	}
	if !within(l.root, abs) {
		return "", fmt.Errorf("%q: %w", p, ErrOutside)
	}
	// Follow symlinks of the longest existing prefix so a link inside the workspace
	// cannot point a write outside it.
	full, err := followExisting(abs)
	if err != nil {
		return "", fmt.Errorf("%q: %w", p, err)
	}
	if !within(l.root, full) {
		return "", fmt.Errorf("%q: %w", p, ErrOutside)
	}
	return full, nil
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Exec implements Sandbox with /bin/sh -c in the workspace. The environment is reduced
// to PATH, HOME (the workspace) and LANG so the host's secrets are not inherited.
func (l *Local) Exec(ctx context.Context, command string, timeout time.Duration) (string, int, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = l.root
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + l.root, "LANG=C.UTF-8"}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), -1, fmt.Errorf("command stopped: %w", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), nil
	}
	if err != nil {
		return string(out), -1, fmt.Errorf("run command: %w", err)
	}
	return string(out), 0, nil
}

// followExisting resolves the symlinks of the longest existing prefix of abs.
func followExisting(abs string) (string, error) {
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(real, rest), nil
}
