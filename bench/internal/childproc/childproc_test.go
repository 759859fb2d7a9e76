package childproc

import (
	"net"
	"os"
	"path/filepath"
	"testing"

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
