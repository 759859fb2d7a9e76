package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
)

// Paths under the endpoint (SaaS serves them at the root, self-hosted under /api/v1,
// which users include in the endpoint).
const (
	PathInfo      = "/info"
	PathSessions  = "/sessions"
	PathMultipart = "/runs/multipart"
	PathBatch     = "/runs/batch"
	// PathRuns is the prefix of one run's path (PATCH /runs/{id})
	PathRuns = "/runs/"
)

// Compression values for ingest bodies.
const (
	CompressionNone = ""
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
)

// ErrCredentials marks an answer that says the API key (or workspace) is wrong.
var ErrCredentials = vendorhttp.ErrCredentials

// ErrTooLarge marks a 413: the request body is over the server's real limit. Send returns
// it as a permanent error (the same body cannot succeed); the exporter splits the runs
// and sends them again in smaller requests.
var ErrTooLarge = vendorhttp.ErrTooLarge

// vendor is LangSmith for the rules both vendor exporters share. 409 counts as
// delivered: a run with this id exists, i.e. an earlier attempt got through.
var vendor = vendorhttp.Vendor{
	Name: "LangSmith",
	CredentialHint: func(status int) string {
		hint := "check api_key (LANGSMITH_API_KEY or LANGCHAIN_API_KEY)"
		if status == http.StatusForbidden {
			hint += " and tenant_id (the workspace id an org-scoped key needs)"
		}
		return hint
	},
	Delivered: func(status int) bool { return status == http.StatusConflict },
}

// Compression levels when compression_params.level is unset: the fastest of each, what
// the SDKs use for their multipart bodies.
var defaultLevels = vendorhttp.Levels{Gzip: kgzip.BestSpeed, Zstd: zstd.SpeedFastest}

// Client talks to one LangSmith deployment. Safe for concurrent use.
type Client struct {
	http       *http.Client
	base       string
	apiKey     string
	tenantID   string
	logger     *zap.Logger
	compressor *vendorhttp.Compressor // nil: multipart bodies go uncompressed
	bufs       sync.Pool
	// useBatch is set once the multipart endpoint answered 404 (or /info said the
	// deployment does not use it): every SDK then switches to /runs/batch for good.
	useBatch atomic.Bool
}

// NewClient returns a client for the deployment at base (e.g. https://api.smith.langchain.com)
// compressing multipart bodies at the default level. The API key is only ever put in the
// x-api-key header, never in errors or logs.
func NewClient(hc *http.Client, base, apiKey, tenantID, compression string, logger *zap.Logger) (*Client, error) {
	return NewClientLevel(hc, base, apiKey, tenantID, compression, 0, logger)
}

// NewClientLevel is NewClient with compression_params.level (0: the default level).
func NewClientLevel(hc *http.Client, base, apiKey, tenantID, compression string, level configcompression.Level, logger *zap.Logger) (*Client, error) {
	c := &Client{
		http: hc, base: strings.TrimRight(base, "/"), apiKey: apiKey, tenantID: tenantID,
		logger: logger,
		bufs:   sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
	var t configcompression.Type
	switch compression {
	case CompressionNone:
	case CompressionGzip:
		t = configcompression.TypeGzip
	case CompressionZstd:
		t = configcompression.TypeZstd
	default:
		return nil, fmt.Errorf("unsupported compression %q", compression)
	}
	comp, err := vendorhttp.NewCompressor(t, level, defaultLevels)
	if err != nil {
		return nil, err
	}
	c.compressor = comp
	return c, nil
}

// Close releases the compressor and idle connections.
func (c *Client) Close() {
	c.compressor.Close()
	c.http.CloseIdleConnections()
}

// UsesBatchEndpoint reports whether the client fell back to /runs/batch.
func (c *Client) UsesBatchEndpoint() bool { return c.useBatch.Load() }

// UseBatchEndpoint makes the client send to /runs/batch from now on.
func (c *Client) UseBatchEndpoint() { c.useBatch.Store(true) }

// BatchConfig is the part of /info's batch_ingest_config the exporter uses.
type BatchConfig struct {
	UseMultipart bool
	Limits       Limits
}

// Info reads /info (unauthenticated by default, but the key is sent for deployments that
// require it). Missing or invalid values fall back to the SDK defaults.
func (c *Client) Info(ctx context.Context) (BatchConfig, error) {
	cfg := BatchConfig{UseMultipart: true, Limits: Limits{MaxRuns: DefaultMaxRuns, MaxBytes: DefaultMaxBytes}}
	resp, err := c.do(ctx, http.MethodGet, PathInfo, nil, "")
	if err != nil {
		return cfg, err
	}
	defer vendorhttp.Drain(resp)
	if resp.StatusCode/100 != 2 {
		return cfg, fmt.Errorf("GET %s: HTTP %d: %s", PathInfo, resp.StatusCode, vendorhttp.ServerMessage(resp))
	}
	var info struct {
		BatchIngestConfig struct {
			UseMultipartEndpoint *bool `json:"use_multipart_endpoint"`
			SizeLimit            *int  `json:"size_limit"`
			SizeLimitBytes       *int  `json:"size_limit_bytes"`
		} `json:"batch_ingest_config"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return cfg, fmt.Errorf("decode %s: %w", PathInfo, err)
	}
	b := info.BatchIngestConfig
	if b.UseMultipartEndpoint != nil {
		cfg.UseMultipart = *b.UseMultipartEndpoint
	}
	if b.SizeLimit != nil && *b.SizeLimit > 0 {
		cfg.Limits.MaxRuns = *b.SizeLimit
	}
	if b.SizeLimitBytes != nil && *b.SizeLimitBytes > 0 {
		cfg.Limits.MaxBytes = *b.SizeLimitBytes
	}
	return cfg, nil
}

// CheckCredentials makes the cheapest authenticated call, GET /sessions?limit=1, as the
// SDKs do. It returns an error wrapping ErrCredentials on 401/403; any other failure
// (network, 5xx) is returned plain so the caller can decide not to block on it.
func (c *Client) CheckCredentials(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, PathSessions+"?limit=1", nil, "")
	if err != nil {
		return err
	}
	defer vendorhttp.Drain(resp)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return vendor.CredentialError(resp.StatusCode, PathSessions, vendorhttp.ServerMessage(resp))
	default:
		return fmt.Errorf("GET %s: HTTP %d: %s", PathSessions, resp.StatusCode, vendorhttp.ServerMessage(resp))
	}
}

// ErrRunNotIngested is why PatchRun failed when LangSmith answered 404: the run is not
// there (yet). It concerns that run only, and is retryable.
var ErrRunNotIngested = errors.New("the run is not there (yet); retried")

// PatchRun sends one update that LangSmith places itself, to PATCH /runs/{id}: JSON,
// uncompressed, as the SDKs send a single run. A 404 (the run's post not ingested yet)
// is retryable.
func (c *Client) PatchRun(ctx context.Context, r *Encoded) error {
	buf := c.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	writeRun(buf, r)
	path := PathRuns + r.ID
	resp, err := c.do(ctx, http.MethodPatch, path, vendorhttp.NewBody(buf.Bytes(), func() { c.bufs.Put(buf) }), "application/json")
	if err != nil {
		return err
	}
	defer vendorhttp.Drain(resp)
	if resp.StatusCode == http.StatusNotFound {
		// LangSmith ingests runs asynchronously: the run's post may not be in yet
		return fmt.Errorf("LangSmith: PATCH %s{id}: HTTP 404: %w", PathRuns, ErrRunNotIngested)
	}
	return vendor.Classify(resp, "PATCH "+PathRuns+"{id}")
}

// Send posts one chunk of runs in one request: multipart, or /runs/batch where the
// deployment has no multipart endpoint (a 404 from multipart). An update the exporter
// could not place (Encoded.Unplaced) goes by PatchRun instead. nil means delivered (2xx,
// or 409: the runs already exist). Errors are permanent (consumererror) for final
// statuses and throttled (Retry-After) for retryable ones.
func (c *Client) Send(ctx context.Context, runs []Encoded) error {
	if !c.useBatch.Load() {
		resp, err := c.postMultipart(ctx, runs)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusNotFound {
			defer vendorhttp.Drain(resp)
			return vendor.Classify(resp, "POST "+PathMultipart)
		}
		vendorhttp.Drain(resp)
		if !c.useBatch.Swap(true) {
			c.logger.Info("LangSmith endpoint has no " + PathMultipart + " (HTTP 404); sending to " + PathBatch + " from now on")
		}
	}
	resp, err := c.postBatch(ctx, runs)
	if err != nil {
		return err
	}
	defer vendorhttp.Drain(resp)
	return vendor.Classify(resp, "POST "+PathBatch)
}

func (c *Client) postMultipart(ctx context.Context, runs []Encoded) (*http.Response, error) {
	raw := c.bufs.Get().(*bytes.Buffer)
	raw.Reset()
	ctype, err := WriteMultipart(raw, runs)
	if err != nil {
		c.bufs.Put(raw)
		return nil, consumererror.NewPermanent(err)
	}
	body := vendorhttp.NewBody(raw.Bytes(), func() { c.bufs.Put(raw) })
	encoding := ""
	if c.compressor != nil {
		buf := c.compressor.Compress(raw.Bytes())
		c.bufs.Put(raw)
		body = vendorhttp.NewBody(buf.Bytes(), func() { c.compressor.Release(buf) })
		encoding = c.compressor.Encoding()
	}
	return c.do(ctx, http.MethodPost, PathMultipart, body, ctype, "Content-Encoding", encoding)
}

// postBatch sends the JSON body uncompressed: deployments without the multipart endpoint
// are older self-hosted ones, and no SDK compresses /runs/batch bodies.
func (c *Client) postBatch(ctx context.Context, runs []Encoded) (*http.Response, error) {
	buf := c.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	WriteBatch(buf, runs)
	return c.do(ctx, http.MethodPost, PathBatch, vendorhttp.NewBody(buf.Bytes(), func() { c.bufs.Put(buf) }), "application/json")
}

// do sends one request; body (nil for none) is closed by the transport. extra holds
// header name/value pairs; empty values are skipped.
func (c *Client) do(ctx context.Context, method, path string, body *vendorhttp.Body, ctype string, extra ...string) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = body
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		if body != nil {
			_ = body.Close()
		}
		return nil, consumererror.NewPermanent(fmt.Errorf("build %s %s: %w", method, path, err))
	}
	if body != nil {
		req.ContentLength = int64(body.Len())
	}
	req.Header.Set("x-api-key", c.apiKey)
	if c.tenantID != "" {
		req.Header.Set("X-Tenant-Id", c.tenantID)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] != "" {
			req.Header.Set(extra[i], extra[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// retryable; without the URL, which may carry credentials
		return nil, vendor.NetworkError(err, method+" "+path)
	}
	return resp, nil
}

// Retryable reports the statuses the official clients retry: 408, 425, 429 and 5xx.
func Retryable(code int) bool { return vendorhttp.Retryable(code) }
