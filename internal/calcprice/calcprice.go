// Package calcprice runs @pydantic/genai-prices' own calculator (calcPrice, under node,
// in test/genai-prices) on calls: the reference the price tests hold agentmeter's costs
// against.
package calcprice

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// Usage is a call's usage in genai-prices' keys.
type Usage struct {
	Input     int64 `json:"input_tokens"`
	CacheRead int64 `json:"cache_read_tokens,omitempty"`
	Write     int64 `json:"cache_write_tokens,omitempty"`
	Write1h   int64 `json:"cache_write_1h_tokens,omitempty"`
	Output    int64 `json:"output_tokens"`
	Reasoning int64 `json:"output_reasoning_tokens,omitempty"`
}

// Call is one model call to price: genai-prices' provider and model ids, its time
// (RFC 3339) and its usage.
type Call struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Timestamp string `json:"timestamp"`
	Usage     Usage  `json:"usage"`
}

// Result is calcPrice's answer for one call: nil when it matched no model.
type Result struct {
	Total   float64 `json:"total"`
	Matched string  `json:"matched"`
	Error   string  `json:"error"`
}

// dir is test/genai-prices of this repository.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "genai-prices")
}

// Require skips the test when node or test/genai-prices/node_modules is missing, and
// fails it instead when CI is set (CI installs both).
func Require(t testing.TB) {
	t.Helper()
	_, modErr := os.Stat(filepath.Join(dir(), "node_modules", "@pydantic", "genai-prices"))
	_, nodeErr := exec.LookPath("node")
	if modErr != nil || nodeErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and test/genai-prices/node_modules are needed (scripts/test-deps.sh installs both): %v %v", modErr, nodeErr)
		}
		t.Skip("node or test/genai-prices/node_modules missing; `make test-deps` installs them")
	}
}

// Price prices calls with calcPrice, one result per call (Require first).
func Price(t testing.TB, calls []Call) []*Result {
	t.Helper()
	Require(t)
	in, err := json.Marshal(calls)
	require.NoError(t, err)
	cmd := exec.Command("node", "crosscheck.mjs")
	cmd.Dir = dir()
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var res []*Result
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res, len(calls))
	return res
}
