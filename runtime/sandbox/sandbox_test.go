package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveConfinesToWorkspace(t *testing.T) {
	root := t.TempDir()
	sb, err := NewLocal(root, "thread-1")
	require.NoError(t, err)
	ws := sb.Root()
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "escape")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")))

	for _, ok := range []struct{ in, want string }{
		{"a.txt", filepath.Join(ws, "a.txt")},
		{"/workspace/sub/b.txt", filepath.Join(ws, "sub", "b.txt")},
		{"/workspace", ws},
		{"", ws},
		{"sub/../c.txt", filepath.Join(ws, "c.txt")},
		{filepath.Join(ws, "d.txt"), filepath.Join(ws, "d.txt")},
	} {
		got, err := sb.Resolve(ok.in)
		require.NoError(t, err, ok.in)
		assert.Equal(t, ok.want, got, ok.in)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "/workspace/../../x", "escape/file", "escape", "passwd", "sub/../../x"} {
		_, err := sb.Resolve(bad)
		assert.True(t, errors.Is(err, ErrOutside), "%q must be refused, got %v", bad, err)
	}
	for _, badID := range []string{"", "..", "a/b", "."} {
		_, err := NewLocal(root, badID)
		assert.Error(t, err, badID)
	}
}

func TestExec(t *testing.T) {
	sb, err := NewLocal(t.TempDir(), "t")
	require.NoError(t, err)
	t.Setenv("AGENTMETER_SECRET_FOR_TEST", "s3cret")
	out, code, err := sb.Exec(context.Background(), "pwd; echo ${AGENTMETER_SECRET_FOR_TEST:-unset}", time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Equal(t, sb.Root()+"\nunset\n", out, "runs in the workspace without the host environment")

	_, code, err = sb.Exec(context.Background(), "exit 3", time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, code)

	start := time.Now()
	_, _, err = sb.Exec(context.Background(), "sleep 5", 100*time.Millisecond)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 3*time.Second)
}
