package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMountedUploads(t *testing.T) {
	root := t.TempDir()
	inner, err := NewLocal(root, "t1")
	if err != nil {
		t.Fatal(err)
	}
	uploads := filepath.Join(t.TempDir(), "user-data", "uploads")
	sb, err := WithMounts(inner, map[string]string{"/mnt/user-data/uploads": uploads})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(uploads, "notes.txt"), []byte("uploaded text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Resolve("/mnt/user-data/uploads/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != "uploaded text\n" {
		t.Fatalf("resolved %s: %q, %v", got, b, err)
	}
	// Outside the mount is refused; other paths still go to the workspace.
	for _, bad := range []string{"/mnt/user-data/uploads/../../etc/passwd", "/mnt/user-data/uploads/../x"} {
		if _, err := sb.Resolve(bad); !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%q) = %v, want ErrOutside", bad, err)
		}
	}
	if p, err := sb.Resolve("/workspace/a.txt"); err != nil || !strings.HasPrefix(p, inner.Root()) {
		t.Errorf("workspace path = %s, %v", p, err)
	}
	// A symlink in the uploads pointing outside is refused.
	if err := os.Symlink("/etc", filepath.Join(uploads, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Resolve("/mnt/user-data/uploads/link/passwd"); !errors.Is(err, ErrOutside) {
		t.Errorf("symlink escape = %v, want ErrOutside", err)
	}
	// The shell sees the virtual path too.
	out, code, err := sb.Exec(context.Background(), "cat /mnt/user-data/uploads/notes.txt", 0)
	if err != nil || code != 0 || out != "uploaded text\n" {
		t.Fatalf("cat = %q, %d, %v", out, code, err)
	}
	if _, err := WithMounts(inner, map[string]string{"relative": uploads}); err == nil {
		t.Error("a relative mount point was accepted")
	}
}
