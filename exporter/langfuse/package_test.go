package langfuse

import (
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ioNop(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
