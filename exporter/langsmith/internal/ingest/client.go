package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/retryafter"
)

// Paths under the endpoint (SaaS serves them at the root, self-hosted under /api/v1,
// which users include in the endpoint).
const (
	PathInfo      = "/info"
	PathSessions  = "/sessions"
	PathMultipart = "/runs/multipart"
	PathBatch     = "/runs/batch"
)

// Compression values for ingest bodies.
const (
	CompressionNone = ""
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
)

// ErrCredentials marks an answer that says the API key (or workspace) is wrong.
var ErrCredentials = errors.New("LangSmith rejected the credentials")

// ErrTooLarge marks a 413: the request body is over the server's real limit. Send returns
// it as a permanent error (the same body cannot succeed); the exporter splits the runs
// and sends them again in smaller requests.
var ErrTooLarge = errors.New("LangSmith rejected the request body as too large (HTTP 413)")

// Client talks to one LangSmith deployment. Safe for concurrent use.
type Client struct {
	http        *http.Client
	base        string
	apiKey      string
	tenantID    string
	compression string
	logger      *zap.Logger
	zstdEnc     *zstd.Encoder
	bufs        sync.Pool
	// useBatch is set once the multipart endpoint answered 404 (or /info said the
	// deployment does not use it): every SDK then switches to /runs/batch for good.
	useBatch atomic.Bool
}

// NewClient returns a client for the deployment at base (e.g. https://api.smith.langchain.com).
// The API key is only ever put in the x-api-key header, never in errors or logs.
func NewClient(hc *http.Client, base, apiKey, tenantID, compression string, logger *zap.Logger) (*Client, error) {
	c := &Client{
		http: hc, base: strings.TrimRight(base, "/"), apiKey: apiKey, tenantID: tenantID,
		compression: compression, logger: logger,
		bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
	switch compression {
	case CompressionNone, CompressionGzip:
	case CompressionZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(4))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		c.zstdEnc = enc
	default:
		return nil, fmt.Errorf("unsupported compression %q", compression)
	}
	return c, nil
}

// Close releases the compressor and idle connections.
func (c *Client) Close() {
	if c.zstdEnc != nil {
		_ = c.zstdEnc.Close()
	}
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
	defer drain(resp)
	if resp.StatusCode/100 != 2 {
		return cfg, fmt.Errorf("GET %s: HTTP %d: %s", PathInfo, resp.StatusCode, serverMessage(resp))
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

// CheckCredentials makes the cheapest authenticated call, GET /sessions?limit=1 (vendor
// notes §2.3). It returns an error wrapping ErrCredentials on 401/403; any other failure
// (network, 5xx) is returned plain so the caller can decide not to block on it.
func (c *Client) CheckCredentials(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, PathSessions+"?limit=1", nil, "")
	if err != nil {
		return err
	}
	defer drain(resp)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return credentialError(resp, PathSessions)
	default:
		return fmt.Errorf("GET %s: HTTP %d: %s", PathSessions, resp.StatusCode, serverMessage(resp))
	}
}

// Send posts one chunk of runs: multipart, or /runs/batch after a 404 from multipart.
// nil means delivered (2xx, or 409: the runs already exist). Errors are permanent
// (consumererror) for final statuses and throttled (Retry-After) for retryable ones.
func (c *Client) Send(ctx context.Context, runs []Encoded) error {
	if !c.useBatch.Load() {
		resp, err := c.postMultipart(ctx, runs)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusNotFound {
			defer drain(resp)
			return classify(resp, PathMultipart)
		}
		drain(resp)
		if !c.useBatch.Swap(true) {
			c.logger.Info("LangSmith endpoint has no " + PathMultipart + " (HTTP 404); sending to " + PathBatch + " from now on")
		}
	}
	resp, err := c.postBatch(ctx, runs)
	if err != nil {
		return err
	}
	defer drain(resp)
	return classify(resp, PathBatch)
}

func (c *Client) postMultipart(ctx context.Context, runs []Encoded) (*http.Response, error) {
	raw := c.bufs.Get().(*bytes.Buffer)
	raw.Reset()
	defer c.bufs.Put(raw)
	ctype, err := WriteMultipart(raw, runs)
	if err != nil {
		return nil, consumererror.NewPermanent(err)
	}
	body, encoding, err := c.compress(raw.Bytes())
	if err != nil {
		return nil, consumererror.NewPermanent(err)
	}
	return c.do(ctx, http.MethodPost, PathMultipart, body, ctype, "Content-Encoding", encoding)
}

// postBatch sends the JSON body uncompressed: deployments without the multipart endpoint
// are older self-hosted ones, and no SDK compresses /runs/batch bodies.
func (c *Client) postBatch(ctx context.Context, runs []Encoded) (*http.Response, error) {
	buf := c.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer c.bufs.Put(buf)
	WriteBatch(buf, runs)
	return c.do(ctx, http.MethodPost, PathBatch, buf.Bytes(), "application/json")
}

func (c *Client) compress(raw []byte) ([]byte, string, error) {
	switch c.compression {
	case CompressionZstd:
		return c.zstdEnc.EncodeAll(raw, make([]byte, 0, len(raw)/4)), CompressionZstd, nil
	case CompressionGzip:
		var out bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
		if _, err := zw.Write(raw); err != nil {
			return nil, "", fmt.Errorf("gzip body: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, "", fmt.Errorf("gzip body: %w", err)
		}
		return out.Bytes(), CompressionGzip, nil
	}
	return raw, "", nil
}

// do sends one request. extra holds header name/value pairs; empty values are skipped.
func (c *Client) do(ctx context.Context, method, path string, body []byte, ctype string, extra ...string) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, consumererror.NewPermanent(fmt.Errorf("build %s %s: %w", method, path, err))
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
		// network errors are retryable; the URL in them carries no secret
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

// classify turns an ingest answer into the collector's error semantics.
func classify(resp *http.Response, path string) error {
	code := resp.StatusCode
	switch {
	case code/100 == 2, code == http.StatusConflict:
		// 409: a run with this id exists, i.e. an earlier attempt got through
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return consumererror.NewPermanent(credentialError(resp, path))
	case code == http.StatusRequestEntityTooLarge:
		return consumererror.NewPermanent(fmt.Errorf("POST %s: %w: %s", path, ErrTooLarge, serverMessage(resp)))
	case Retryable(code):
		err := fmt.Errorf("POST %s: HTTP %d: %s", path, code, serverMessage(resp))
		if d, ok := retryafter.Parse(resp.Header.Get("Retry-After"), time.Now()); ok {
			return exporterhelper.NewThrottleRetry(err, d)
		}
		return err
	default:
		return consumererror.NewPermanent(fmt.Errorf("POST %s: HTTP %d: %s", path, code, serverMessage(resp)))
	}
}

func credentialError(resp *http.Response, path string) error {
	hint := "check api_key (LANGSMITH_API_KEY or LANGCHAIN_API_KEY)"
	if resp.StatusCode == http.StatusForbidden {
		hint += " and tenant_id (the workspace id an org-scoped key needs)"
	}
	return fmt.Errorf("%w (HTTP %d on %s): %s; server said: %s", ErrCredentials, resp.StatusCode, path, hint, serverMessage(resp))
}

// Retryable reports the statuses the official clients retry: 408, 425, 429 and 5xx.
func Retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooEarly ||
		code == http.StatusTooManyRequests || code/100 == 5
}

// serverMessage extracts the server's explanation: JSON "detail"/"error"/"message", or
// the body's text, cut to 512 bytes.
func serverMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var j map[string]any
	if json.Unmarshal(b, &j) == nil {
		for _, k := range []string{"detail", "error", "message"} {
			if v, ok := j[k]; ok {
				if s, ok := v.(string); ok {
					return cut(s)
				}
				if enc, err := json.Marshal(v); err == nil {
					return cut(string(enc))
				}
			}
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return http.StatusText(resp.StatusCode)
	}
	return cut(s)
}

func cut(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
