package build

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorType(t *testing.T) {
	assert.Equal(t, "ValueError", ErrorType("ValueError('boom')"))
	assert.Equal(t, "TimeoutError", ErrorType("TimeoutError: slow"))
	assert.Equal(t, "_OTHER", ErrorType("something went wrong"))
	assert.Equal(t, "_OTHER", ErrorType(""))
	assert.Equal(t, "ab", Truncate("abé", 3))
}
