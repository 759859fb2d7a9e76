package pricing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxDatasetBytes bounds a fetched data file (the genai-prices data.json is under 1 MB).
const MaxDatasetBytes = 32 << 20

// Refresh outcomes.
const (
	RefreshUpdated     = "updated"
	RefreshNotModified = "not_modified"
	RefreshFailed      = "failed"
)

// Refresh settings: defaults and the shortest interval.
const (
	DefaultRefreshInterval = 24 * time.Hour
	DefaultRefreshTimeout  = 30 * time.Second
	MinRefreshInterval     = time.Second
)

// CheckRefreshSettings reports every problem of a refresh setting, each naming its key
// under prefix ("price_refresh.url must be ..."); the URL is shown redacted.
func CheckRefreshSettings(prefix, rawURL string, interval, timeout time.Duration) []error {
	var errs []error
	if u, err := url.Parse(rawURL); rawURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s.url must be an http or https URL, got %q", prefix, RedactURL(rawURL)))
	}
	if interval != 0 && interval < MinRefreshInterval {
		errs = append(errs, fmt.Errorf("%s.interval must be at least %s, got %s", prefix, MinRefreshInterval, interval))
	}
	if timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout must not be negative, got %s", prefix, timeout))
	}
	return errs
}

// RefreshClient is the HTTP client of a refresh with this timeout (0: the default).
func RefreshClient(timeout time.Duration) *http.Client {
	if timeout == 0 {
		timeout = DefaultRefreshTimeout
	}
	return &http.Client{Timeout: timeout}
}

// Active is the table in use and the dataset it was built from.
type Active struct {
	Table *Table
	// Version is the dataset's version; a data file that names none is named by its ETag,
	// else by "sha256:" and the start of its content hash.
	Version string
	// Date is the dataset's publication date; for a data file that names none, its
	// Last-Modified, else when it was first fetched.
	Date time.Time
	// Source is "snapshot" or the (redacted) URL the dataset came from.
	Source string
}

// Age is how old the dataset is at now.
func (a *Active) Age(now time.Time) time.Duration { return now.Sub(a.Date) }

// SnapshotActive is the embedded snapshot made into a table by build.
func SnapshotActive(build func(*Dataset) (*Table, error)) (*Active, error) {
	ds := DefaultDataset()
	tab, err := build(ds)
	if err != nil {
		return nil, err
	}
	date, _ := time.Parse(time.DateOnly, ds.Date) // checked by TestDefaultTableLoads
	return &Active{Table: tab, Version: ds.Version, Date: date, Source: "snapshot"}, nil
}

// RefreshResult is what one refresh did. Err says why a failed refresh kept the table.
type RefreshResult struct {
	Outcome string
	Err     error
	Active  *Active // the table in use after the refresh
}

// Refresher keeps a price table current from a genai-prices data file served over HTTP.
// Each refresh is a conditional GET (If-None-Match / If-Modified-Since from the last good
// response); a new file is parsed and checked completely and built into a table before it
// replaces the active one in one atomic swap. On any failure (a status other than 200 or
// 304, a truncated or oversized body, bad JSON, a malformed price) the last good table
// stays. Readers call Current, which never waits for a refresh.
type Refresher struct {
	url      string
	interval time.Duration
	client   *http.Client
	build    func(*Dataset) (*Table, error)
	onResult func(RefreshResult)
	now      func() time.Time

	cur atomic.Pointer[Active]

	mu       sync.Mutex // one refresh at a time; guards the validators below
	etag     string
	lastMod  string
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// RefresherOptions configure a Refresher.
type RefresherOptions struct {
	URL      string
	Interval time.Duration // 0: DefaultRefreshInterval
	Client   *http.Client  // its Timeout bounds each refresh; nil: RefreshClient(0)
	// Build makes the full table from a dataset (the overrides, files and config rows on
	// top); its error fails the refresh.
	Build func(*Dataset) (*Table, error)
	// OnResult, when set, is told every refresh's result (for logs and metrics).
	OnResult func(RefreshResult)
	Now      func() time.Time
}

// NewRefresher starts from initial (the snapshot's table).
func NewRefresher(initial *Active, o RefresherOptions) *Refresher {
	r := &Refresher{url: o.URL, interval: o.Interval, client: o.Client, build: o.Build, onResult: o.OnResult, now: o.Now}
	if r.interval == 0 {
		r.interval = DefaultRefreshInterval
	}
	if r.client == nil {
		r.client = RefreshClient(0)
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.cur.Store(initial)
	return r
}

// Current is the active table and its dataset.
func (r *Refresher) Current() *Active { return r.cur.Load() }

// Start refreshes at once and then every interval, in its own goroutine, until Stop.
func (r *Refresher) Start() {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		t := time.NewTicker(r.interval)
		defer t.Stop()
		for {
			r.Refresh(ctx)
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the refresh loop, cancelling a refresh under way, and waits for it.
func (r *Refresher) Stop() {
	if r.stop == nil {
		return
	}
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}

// Refresh fetches the data file once and swaps the table when it changed.
func (r *Refresher) Refresh(ctx context.Context) RefreshResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.refresh(ctx)
	res.Active = r.cur.Load()
	if r.onResult != nil {
		r.onResult(res)
	}
	return res
}

func (r *Refresher) refresh(ctx context.Context) RefreshResult {
	where := RedactURL(r.url)
	fail := func(err error) RefreshResult {
		return RefreshResult{Outcome: RefreshFailed, Err: fmt.Errorf("price refresh from %s: %w", where, err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return fail(err)
	}
	if r.etag != "" {
		req.Header.Set("If-None-Match", r.etag)
	}
	if r.lastMod != "" {
		req.Header.Set("If-Modified-Since", r.lastMod)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fail(errors.Unwrap(err)) // the url.Error's URL may hold a secret
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return RefreshResult{Outcome: RefreshNotModified}
	case http.StatusOK:
	default:
		return fail(fmt.Errorf("status %s", resp.Status))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDatasetBytes+1))
	if err != nil {
		return fail(fmt.Errorf("reading the body: %w", err))
	}
	if len(body) > MaxDatasetBytes {
		return fail(fmt.Errorf("body above %d bytes", MaxDatasetBytes))
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return fail(fmt.Errorf("truncated body: %d of %d bytes", len(body), resp.ContentLength))
	}
	ds, err := ParseDataset(body, where)
	if err != nil {
		return fail(err)
	}
	tab, err := r.build(ds)
	if err != nil {
		return fail(err)
	}
	a := &Active{Table: tab, Version: ds.Version, Source: where}
	etag := resp.Header.Get("ETag")
	if a.Version == "" {
		if a.Version = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`); a.Version == "" {
			sum := sha256.Sum256(body)
			a.Version = "sha256:" + hex.EncodeToString(sum[:6])
		}
	}
	switch d, lm := ds.Date, resp.Header.Get("Last-Modified"); {
	case d != "":
		if a.Date, err = time.Parse(time.DateOnly, d); err != nil {
			return fail(fmt.Errorf("date must be YYYY-MM-DD, got %q", d))
		}
	case lm != "":
		if a.Date, err = http.ParseTime(lm); err != nil {
			a.Date = r.now()
		}
	default:
		a.Date = r.now()
		if old := r.cur.Load(); old.Version == a.Version {
			a.Date = old.Date // the same file again: it is as old as when first seen
		}
	}
	r.etag, r.lastMod = etag, resp.Header.Get("Last-Modified")
	r.cur.Store(a)
	return RefreshResult{Outcome: RefreshUpdated}
}

// RedactURL is u without credentials and query (which may carry a token), for logs.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable url)"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}
