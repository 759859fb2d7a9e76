package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func fakeBinary(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	return p
}

func setPorts(t *testing.T) {
	for _, k := range []string{"AGENTMETER_OTLP_GRPC_ENDPOINT", "AGENTMETER_OTLP_HTTP_ENDPOINT",
		"AGENTMETER_PROMETHEUS_ENDPOINT", "AGENTMETER_HEALTH_ENDPOINT", "AGENTMETER_AGENTUSAGE_ENDPOINT"} {
		t.Setenv(k, freeAddr(t))
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	t.Setenv("AGENTMETER_TELEMETRY_PORT", port)
}

// A collector that refuses its config ends the demo at once with its log, not a hang.
func TestDemoCollectorExitsAtStart(t *testing.T) {
	setPorts(t)
	col := fakeBinary(t, `echo "Error: invalid configuration: exporters::langsmith: LangSmith tracing is enabled" >&2; exit 1`)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run([]string{"-collector", col, "-agentmeter", "/bin/false", "-timeout", "30s"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, errOut.String(), "collector exited: exit status 1")
	assert.Contains(t, errOut.String(), "LangSmith tracing is enabled", "the collector's log is shown")
}

// A port in use stops the demo before it starts anything.
func TestDemoPortInUse(t *testing.T) {
	setPorts(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	t.Setenv("AGENTMETER_PROMETHEUS_ENDPOINT", l.Addr().String())
	var out, errOut bytes.Buffer
	code := run([]string{"-collector", "/bin/false", "-agentmeter", "/bin/false"}, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), fmt.Sprintf("%s is in use", l.Addr()))
}

func TestDemoFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"-runs", "0"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-runs must be at least 1")
	assert.Equal(t, 2, run([]string{"-nope"}, &out, &errOut))
}
