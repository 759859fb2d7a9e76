package ingest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/runtree"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/retryafter"
)

func encodedAgentTrace(t *testing.T, seed byte) []Encoded {
	t.Helper()
	td, _ := fakevendor.AgentTrace(seed, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	runs, _ := runtree.NewMapper("p", 100).Map(td)
	enc, _ := EncodeAll(runs, nil)
	return enc
}

func TestSplit(t *testing.T) {
	runs := encodedAgentTrace(t, 1)
	chunks := Split(runs, Limits{MaxRuns: 3, MaxBytes: 1 << 20})
	require.Len(t, chunks, 3)
	assert.Len(t, chunks[0], 3)
	assert.Len(t, chunks[2], 2)

	one := runs[0].wireSize()
	chunks = Split(runs, Limits{MaxRuns: 100, MaxBytes: one})
	assert.Len(t, chunks, len(runs), "each run alone when the byte limit fits only one")
	chunks = Split(runs, Limits{MaxRuns: 100, MaxBytes: 1})
	assert.Len(t, chunks, len(runs), "a run larger than the limit is still sent, alone")
	total := 0
	for _, c := range Split(runs, Limits{}) {
		total += len(c)
	}
	assert.Equal(t, len(runs), total)
	assert.Empty(t, Split(nil, Limits{}))
}

// A 429 whose Retry-After overflows int64 nanoseconds becomes a throttle of retryafter.Max.
func TestHugeRetryAfterIsCappedOnTheWire(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "10000000000") // 1e10 s: wrapped negative before the cap
	c, err := NewClient(&http.Client{Transport: answer{status: 429, header: h}}, "http://langsmith.invalid", "k", "", CompressionNone, zap.NewNop())
	require.NoError(t, err)
	defer c.Close()
	err = c.Send(context.Background(), nil)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	// exporterhelper's throttle error says the delay it will wait
	assert.True(t, strings.HasPrefix(err.Error(), "Throttle ("+retryafter.Max.String()+")"), err.Error())
}

func TestRetryable(t *testing.T) {
	for _, c := range []int{408, 425, 429, 500, 502, 503, 504, 599} {
		assert.True(t, Retryable(c), c)
	}
	for _, c := range []int{400, 401, 403, 404, 409, 413, 422} {
		assert.False(t, Retryable(c), c)
	}
}

func newClient(t *testing.T, url, key, comp string) *Client {
	t.Helper()
	c, err := NewClient(http.DefaultClient, url, key, "", comp, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestSendEveryCompression(t *testing.T) {
	for _, comp := range []string{CompressionNone, CompressionGzip, CompressionZstd} {
		fake := fakevendor.NewLangSmith("k")
		c := newClient(t, fake.URL, "k", comp)
		runs := encodedAgentTrace(t, 2)
		require.NoError(t, c.Send(context.Background(), runs))
		assert.Equal(t, len(runs), fake.RunCount())
		assert.Empty(t, fake.Violations())
		assert.Equal(t, comp, fake.Requests()[0].Encoding)
		fake.Close()
	}
}

func TestSendStatuses(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		body       string
		check      func(t *testing.T, err error)
	}{
		{409, "", "", func(t *testing.T, err error) { assert.NoError(t, err) }},
		{429, "3", "", func(t *testing.T, err error) {
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err))
			assert.Contains(t, err.Error(), "Throttle (3s)")
		}},
		{503, "", "busy", func(t *testing.T, err error) {
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err))
			assert.Contains(t, err.Error(), "HTTP 503: busy")
		}},
		{422, "", `{"detail":"post.0.session_id: Must validate one and only one schema"}`, func(t *testing.T, err error) {
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err))
			assert.Contains(t, err.Error(), "HTTP 422: post.0.session_id: Must validate one and only one schema")
		}},
		{403, "", `{"error":"org_scoped_key_requires_workspace"}`, func(t *testing.T, err error) {
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err))
			assert.True(t, errors.Is(err, ErrCredentials))
			assert.Contains(t, err.Error(), "tenant_id")
			assert.Contains(t, err.Error(), "org_scoped_key_requires_workspace")
		}},
	}
	for _, tc := range cases {
		fake := fakevendor.NewLangSmith("k")
		fake.Script(fakevendor.LangSmithResponse{Status: tc.status, RetryAfter: tc.retryAfter, Body: tc.body})
		err := newClient(t, fake.URL, "k", CompressionZstd).Send(context.Background(), encodedAgentTrace(t, 3))
		tc.check(t, err)
		fake.Close()
	}
}

func TestWrongKeyIsACredentialError(t *testing.T) {
	fake := fakevendor.NewLangSmith("right")
	defer fake.Close()
	c := newClient(t, fake.URL, "wrong-secret", CompressionZstd)
	err := c.Send(context.Background(), encodedAgentTrace(t, 4))
	require.ErrorIs(t, err, ErrCredentials)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "HTTP 401")
	assert.NotContains(t, err.Error(), "wrong-secret")
	err = c.CheckCredentials(context.Background())
	require.ErrorIs(t, err, ErrCredentials)
	require.NoError(t, newClient(t, fake.URL, "right", "").CheckCredentials(context.Background()))
}

func TestMultipart404FallsBackToBatchForGood(t *testing.T) {
	fake := fakevendor.NewLangSmith("k")
	defer fake.Close()
	fake.DisableMultipart()
	c := newClient(t, fake.URL, "k", CompressionZstd)
	require.NoError(t, c.Send(context.Background(), encodedAgentTrace(t, 5)))
	require.NoError(t, c.Send(context.Background(), encodedAgentTrace(t, 6)))
	assert.True(t, c.UsesBatchEndpoint())
	var paths []string
	for _, r := range fake.Requests() {
		paths = append(paths, r.Path)
	}
	assert.Equal(t, []string{PathMultipart, PathBatch, PathBatch}, paths, "404 is remembered")
	assert.Equal(t, 16, fake.RunCount())
	assert.Empty(t, fake.Violations())
	assert.Empty(t, fake.Requests()[1].Encoding, "batch bodies are sent uncompressed")
}

func TestInfo(t *testing.T) {
	fake := fakevendor.NewLangSmith("k")
	defer fake.Close()
	fake.SetInfo(&fakevendor.LangSmithInfo{UseMultipart: false, SizeLimit: 7, SizeLimitBytes: 1234})
	bc, err := newClient(t, fake.URL, "k", "").Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, BatchConfig{UseMultipart: false, Limits: Limits{MaxRuns: 7, MaxBytes: 1234}}, bc)

	fake.SetInfo(nil)
	bc, err = newClient(t, fake.URL, "k", "").Info(context.Background())
	require.Error(t, err)
	assert.Equal(t, BatchConfig{UseMultipart: true, Limits: Limits{MaxRuns: DefaultMaxRuns, MaxBytes: DefaultMaxBytes}}, bc, "fallbacks")

	// zero or missing values keep the fallbacks
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"batch_ingest_config":{"size_limit":0,"size_limit_bytes":null}}`))
	}))
	defer srv.Close()
	bc, err = newClient(t, srv.URL, "k", "").Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Limits{MaxRuns: DefaultMaxRuns, MaxBytes: DefaultMaxBytes}, bc.Limits)
}
