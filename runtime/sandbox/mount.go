package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Mounted is a Sandbox with extra folders at virtual paths, such as a thread's uploads at
// DeerFlow's /mnt/user-data/uploads: a tool path under a mount resolves into the mount's
// folder (confined to it, symlinks included), anything else goes to the inner sandbox, and
// shell commands see the virtual paths rewritten to the real folders.
type Mounted struct {
	inner  Sandbox
	mounts []mount // longest virtual path first
}

type mount struct {
	virtual, dir string
}

// WithMounts returns inner with mounts (virtual path → folder). The folders are created.
func WithMounts(inner Sandbox, mounts map[string]string) (*Mounted, error) {
	m := &Mounted{inner: inner}
	for v, dir := range mounts {
		v = filepath.Clean(v)
		if !filepath.IsAbs(v) || v == "/" {
			return nil, fmt.Errorf("sandbox: mount point %q must be an absolute path below /", v)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: create %s: %w", v, err)
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: resolve %s: %w", v, err)
		}
		m.mounts = append(m.mounts, mount{virtual: v, dir: real})
	}
	sort.Slice(m.mounts, func(i, j int) bool { return len(m.mounts[i].virtual) > len(m.mounts[j].virtual) })
	return m, nil
}

func (m *Mounted) ID() string   { return m.inner.ID() }
func (m *Mounted) Root() string { return m.inner.Root() }

// Resolve implements Sandbox.
func (m *Mounted) Resolve(p string) (string, error) {
	t := strings.TrimSpace(p)
	for _, mt := range m.mounts {
		if t == mt.virtual || strings.HasPrefix(t, mt.virtual+"/") {
			abs := filepath.Join(mt.dir, strings.TrimPrefix(t, mt.virtual))
			if !within(mt.dir, abs) && abs != mt.dir {
				return "", fmt.Errorf("%q: %w", p, ErrOutside)
			}
			full, err := followExisting(abs)
			if err != nil {
				return "", fmt.Errorf("%q: %w", p, err)
			}
			if !within(mt.dir, full) && full != mt.dir {
				return "", fmt.Errorf("%q: %w", p, ErrOutside)
			}
			return full, nil
		}
	}
	return m.inner.Resolve(p)
}

// Exec implements Sandbox: the mounts' virtual paths in command become their folders.
func (m *Mounted) Exec(ctx context.Context, command string, timeout time.Duration) (string, int, error) {
	for _, mt := range m.mounts {
		command = strings.ReplaceAll(command, mt.virtual, mt.dir)
	}
	return m.inner.Exec(ctx, command, timeout)
}
