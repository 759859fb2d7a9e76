package pricing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const bareData = `[{"id": "openai", "models": [{"id": "gpt-9", "match": {"equals": "gpt-9"}, "prices": {"input_mtok": 1, "output_mtok": 4}}]}]`

func newTestRefresher(t *testing.T, url string) *Refresher {
	t.Helper()
	initial, err := SnapshotActive(func(ds *Dataset) (*Table, error) { return New(WithDataset(ds)...) })
	require.NoError(t, err)
	return NewRefresher(initial, RefresherOptions{URL: url, Interval: time.Hour,
		Build: func(ds *Dataset) (*Table, error) { return New(WithDataset(ds)...) },
		Now:   func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }})
}

// A bare data.json names no version or date: the ETag names it, else its content hash;
// Last-Modified dates it, and comes back as If-Modified-Since.
func TestRefreshOfABareDataFile(t *testing.T) {
	var ifModifiedSince string
	etag, lastMod := `"abc"`, "Tue, 24 Nov 2026 10:00:00 GMT"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ifModifiedSince = r.Header.Get("If-Modified-Since")
		if lastMod != "" && ifModifiedSince == lastMod {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		if lastMod != "" {
			w.Header().Set("Last-Modified", lastMod)
		}
		_, _ = w.Write([]byte(bareData))
	}))
	defer srv.Close()
	r := newTestRefresher(t, srv.URL)
	res := r.Refresh(context.Background())
	require.Equal(t, RefreshUpdated, res.Outcome, "%v", res.Err)
	assert.Equal(t, "abc", res.Active.Version)
	assert.Equal(t, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), res.Active.Date.UTC())
	_, ok := res.Active.Table.Lookup("openai", "gpt-9", time.Now())
	assert.True(t, ok)

	assert.Equal(t, RefreshNotModified, r.Refresh(context.Background()).Outcome)
	assert.Equal(t, lastMod, ifModifiedSince)

	// no validators at all: named by content, dated when first seen, and as old as that later
	r2 := newTestRefresher(t, srv.URL)
	etag, lastMod = "", ""
	res = r2.Refresh(context.Background())
	require.Equal(t, RefreshUpdated, res.Outcome)
	assert.True(t, strings.HasPrefix(res.Active.Version, "sha256:"), res.Active.Version)
	assert.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), res.Active.Date)
	r2.now = func() time.Time { return time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC) }
	res = r2.Refresh(context.Background())
	assert.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), res.Active.Date, "the same file is as old as when first seen")
}

func TestRefreshRefusesAnOversizedBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for range MaxDatasetBytes>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	r := newTestRefresher(t, srv.URL)
	res := r.Refresh(context.Background())
	require.Equal(t, RefreshFailed, res.Outcome)
	assert.ErrorContains(t, res.Err, "body above")
	assert.Equal(t, DefaultDataset().Version, r.Current().Version)
}

func TestRefresherStopWithoutStart(t *testing.T) {
	r := newTestRefresher(t, "http://127.0.0.1:1/")
	r.Stop() // nothing started: returns at once
}
