package langsmith

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// translateRequests runs requests (each a list of ops) through one translator the way
// the receiver does, optionally with Prepare before each Plan, and returns every span
// built, in order, as OTLP JSON (attribute order included), then the drained rest.
func translateRequests(t *testing.T, requests [][]Op, prepare bool) string {
	t.Helper()
	tr := NewTranslator(time.Minute, 100)
	var out bytes.Buffer
	m := &ptrace.JSONMarshaler{}
	emit := func(td ptrace.Traces) {
		b, err := m.MarshalTraces(td)
		require.NoError(t, err)
		out.Write(b)
		out.WriteByte('\n')
	}
	for _, ops := range requests {
		if prepare {
			Prepare(ops)
		}
		p := tr.Plan(ops)
		emit(p.Build())
		p.Commit(t0)
	}
	rest := tr.Drain()
	for _, r := range rest {
		require.Nil(t, r.prep, "a parked run keeps no prepared view of the request buffer")
	}
	// parked runs drain in no fixed order: by id, then as BuildRuns would sort them
	slices.SortFunc(rest, func(a, b Run) int { return strings.Compare(a.ID, b.ID) })
	sortByDottedOrder(rest)
	for _, r := range rest {
		emit(tr.BuildRuns([]Run{r}))
	}
	return out.String()
}

// checkPrepareSame: decoding bodies (one request each) and translating them gives the
// same spans, byte for byte, with and without Prepare.
func checkPrepareSame(t *testing.T, decode func([]byte) ([]Op, error), bodies ...[]byte) bool {
	t.Helper()
	var plain, prepped [][]Op
	for _, b := range bodies {
		ops, err := decode(b)
		if err != nil {
			continue
		}
		again, err := decode(b)
		require.NoError(t, err)
		plain, prepped = append(plain, ops), append(prepped, again)
	}
	if len(plain) == 0 {
		return false
	}
	assert.Equal(t, translateRequests(t, plain, false), translateRequests(t, prepped, true))
	return true
}

func decodeBatchOps(b []byte) ([]Op, error) {
	ops, _, err := DecodeBatch(b)
	return ops, err
}

func TestPrepareMatchesUnprepared(t *testing.T) {
	accepted := 0
	for _, body := range scanBodies {
		if checkPrepareSame(t, decodeBatchOps, []byte(body)) {
			accepted++
		}
	}
	assert.Greater(t, accepted, 5)
	// every scan body as one request after another: parked runs, PATCHes of runs
	// emitted earlier, parents in earlier requests
	all := make([][]byte, 0, len(scanBodies))
	for _, body := range scanBodies {
		all = append(all, []byte(body))
	}
	assert.True(t, checkPrepareSame(t, decodeBatchOps, all...))

	seed, err := os.ReadFile(filepath.Join("testdata", "multipart_sdk.txt"))
	require.NoError(t, err)
	ct, err := os.ReadFile(filepath.Join("testdata", "multipart_sdk.content-type"))
	require.NoError(t, err)
	decodeMP := func(b []byte) ([]Op, error) {
		ops, _, err := DecodeMultipart(string(ct), bytes.NewReader(b))
		return ops, err
	}
	assert.True(t, checkPrepareSame(t, decodeMP, seed))
	assert.True(t, checkPrepareSame(t, decodeMP, seed, seed), "the same runs re-sent")
}

// The golden POST-then-PATCH pair and a subagent under a tool of an earlier request,
// with Prepare.
func TestPrepareAcrossRequests(t *testing.T) {
	tool := `{"post":[{"id":"` + toolID + `","trace_id":"` + traceID + `","parent_run_id":"` + traceID + `","name":"task","run_type":"tool","start_time":"2026-01-01T00:00:01Z","inputs":{"tool_call":{"id":"call_9"}}}]}`
	agent := `{"post":[{"id":"01a22a31-cdeb-7000-8000-037a8c6bd3a2","trace_id":"` + traceID + `","parent_run_id":"` + toolID + `","name":"bash","run_type":"chain","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z"}]}`
	toolEnd := `{"patch":[{"id":"` + toolID + `","end_time":"2026-01-01T00:00:04Z","outputs":{"subagent_status":"completed"}}]}`
	lead := `{"post":[{"id":"` + traceID + `","trace_id":"` + traceID + `","name":"lead_agent","run_type":"chain","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:05Z","extra":{"metadata":{"thread_id":"th"}}}]}`
	assert.True(t, checkPrepareSame(t, decodeBatchOps, []byte(tool), []byte(agent), []byte(toolEnd), []byte(lead)))
}
