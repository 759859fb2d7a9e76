package langfuse

import (
	"io"
	"strings"
)

func ioNop(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
