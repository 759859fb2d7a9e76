// Package childproc holds what the bench programs need to run a collector or load
// generator as a child process: free loopback addresses, a work folder, and the last
// lines of its output for an error message.
package childproc

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
