package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 0, dispatch([]string{"version"}, &out, &errb))
	assert.Contains(t, out.String(), "agentmeter ")

	out.Reset()
	errb.Reset()
	assert.Equal(t, 2, dispatch([]string{"nope"}, &out, &errb))
	assert.Contains(t, errb.String(), `unknown command "nope"`)
	assert.Contains(t, errb.String(), "version")

	errb.Reset()
	assert.Equal(t, 2, dispatch(nil, &out, &errb))
	assert.Contains(t, errb.String(), "usage: agentmeter")
}
