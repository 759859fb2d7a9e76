package langfuse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/shape"
	"github.com/agentmeter/agentmeter/internal/retryafter"
)

const (
	// headerIngestionVersion marks the exporter as v4-ready so Langfuse writes spans
	// straight to its events table instead of the ~10 min dual-write path (§1.6).
	headerIngestionVersion = "x-langfuse-ingestion-version"
	ingestionVersion       = "4"
	contentTypeProtobuf    = "application/x-protobuf"
	maxResponseRead        = 64 * 1024
	maxServerMessage       = 512
)

// splicer is a shape.Splicer with its output buffer, pooled across requests.
type splicer struct {
	shape.Splicer
	out []byte
}

var splicers = sync.Pool{New: func() any { return new(splicer) }}

// pooledBody is a request body over a pooled buffer, handed back on Close (the
// transport always closes a request body, even on errors).
type pooledBody struct {
	*bytes.Reader
	once    sync.Once
	release func()
}

func newPooledBody(b []byte, release func()) *pooledBody {
	return &pooledBody{Reader: bytes.NewReader(b), release: release}
}

func (b *pooledBody) Close() error {
	b.once.Do(b.release)
	return nil
}

// errTooLarge is returned by post for a 413; sendAll splits the batch and resends.
var errTooLarge = errors.New("langfuse rejected the request body as too large (HTTP 413)")

type langfuseExporter struct {
	cfg         *Config
	settings    component.TelemetrySettings
	logger      *zap.Logger
	client      *http.Client
	tracesURL   string
	projectsURL string
	auth        string // "Basic …"; never logged
	userAgent   string
	marshaler   ptrace.ProtoMarshaler
	gzip        *gzipPool // nil: bodies are sent uncompressed
}

func newExporter(cfg *Config, set exporter.Settings) *langfuseExporter {
	return &langfuseExporter{
		cfg:         cfg,
		settings:    set.TelemetrySettings,
		logger:      set.Logger,
		tracesURL:   tracesURL(cfg.Endpoint),
		projectsURL: projectsURL(cfg.Endpoint),
		auth:        "Basic " + base64.StdEncoding.EncodeToString([]byte(string(cfg.PublicKey)+":"+string(cfg.SecretKey))),
		userAgent: fmt.Sprintf("agentmeter-langfuse-exporter/%s (%s/%s)",
			set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH),
		gzip: newGzipPool(cfg.Compression, int(cfg.CompressionParams.Level)),
	}
}

func (e *langfuseExporter) start(ctx context.Context, host component.Host) error {
	// The exporter gzips bodies itself (gzip.go), so the client must not compress again.
	clientCfg := e.cfg.ClientConfig
	clientCfg.Compression = ""
	client, err := clientCfg.ToClient(ctx, host.GetExtensions(), e.settings)
	if err != nil {
		return fmt.Errorf("langfuse: building the HTTP client: %w", err)
	}
	e.client = client
	if e.cfg.CheckCredentials {
		return e.checkCredentials(ctx)
	}
	return nil
}

func (e *langfuseExporter) shutdown(context.Context) error {
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	return nil
}

// push plans the Langfuse attributes of every span (shape.NewPlan) and sends the batch
// with them spliced into the encoded request. td itself is not changed, so a retry plans
// the same attributes again.
func (e *langfuseExporter) push(ctx context.Context, td ptrace.Traces) error {
	plan := shape.NewPlan(td)
	defer plan.Release()
	return e.sendAll(ctx, td, plan)
}

// sendAll posts td; on 413 it splits the batch in halves and sends each, recursively,
// until a single span is left. The result tells exporterhelper what to retry: only the
// parts that failed with a retryable error (consumererror.Traces), so halves that went
// through are not sent again.
func (e *langfuseExporter) sendAll(ctx context.Context, td ptrace.Traces, plan *shape.Plan) error {
	err := e.post(ctx, td, plan)
	if !errors.Is(err, errTooLarge) {
		return err
	}
	n := td.SpanCount()
	if n <= 1 {
		return consumererror.NewPermanent(fmt.Errorf("%w: a single span is over the server's limit, dropping it", err))
	}
	e.logger.Debug("Langfuse rejected the batch as too large; splitting it", zap.Int("spans", n))
	// splitTraces keeps span order, so the plan splits at the same index
	first, second := splitTraces(td, n/2)
	pa, pb := plan.Slice(0, n/2), plan.Slice(n/2, n)
	return e.combine(
		splitPart{first, pa, e.sendAll(ctx, first, pa)},
		splitPart{second, pb, e.sendAll(ctx, second, pb)})
}

type splitPart struct {
	td   ptrace.Traces
	plan *shape.Plan
	err  error
}

// combine merges the outcomes of two halves: permanent failures are logged and dropped,
// retryable ones are returned with just their data. That data gets its planned
// attributes applied first: planned again on its own, a half that lacks its trace's root
// span would lose the trace name and tags; applied, they are there and nothing is added
// twice (plans are set-if-absent).
func (e *langfuseExporter) combine(parts ...splitPart) error {
	retry := ptrace.NewTraces()
	var retryErrs, permErrs []error
	for _, part := range parts {
		switch {
		case part.err == nil:
		case consumererror.IsPermanent(part.err):
			permErrs = append(permErrs, part.err)
		default:
			data := part.td
			var te consumererror.Traces
			if errors.As(part.err, &te) {
				data = te.Data() // a deeper split already applied its plan
			} else {
				part.plan.Apply(data)
			}
			data.ResourceSpans().MoveAndAppendTo(retry.ResourceSpans())
			retryErrs = append(retryErrs, part.err)
		}
	}
	switch {
	case len(retryErrs) == 0 && len(permErrs) == 0:
		return nil
	case len(retryErrs) == 0:
		return consumererror.NewPermanent(errors.Join(permErrs...))
	}
	for _, err := range permErrs {
		e.logger.Error("Dropping part of a split batch that Langfuse will not accept", zap.Error(err))
	}
	return consumererror.NewTraces(errors.Join(retryErrs...), retry)
}

// post sends one OTLP/HTTP protobuf request and classifies the answer
// (docs/contract.md#exporters): 2xx ok; 413 errTooLarge; 429, 5xx and network errors retryable (honouring
// Retry-After); 400, 401, 403 and every other status permanent.
func (e *langfuseExporter) post(ctx context.Context, td ptrace.Traces, plan *shape.Plan) error {
	raw, err := e.marshaler.MarshalTraces(td)
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("langfuse: encoding spans: %w", err))
	}
	sb := splicers.Get().(*splicer)
	body, err := sb.Splice(sb.out[:0], raw, plan)
	if err != nil {
		splicers.Put(sb)
		return consumererror.NewPermanent(fmt.Errorf("langfuse: adding Langfuse attributes: %w", err))
	}
	sb.out = body
	// The transport may still read the body after Do returns (an early answer such as a
	// 413 before the upload ended); a pooled buffer goes back only when it closes it.
	reqBody := newPooledBody(body, func() { splicers.Put(sb) })
	encoding := ""
	if e.gzip != nil {
		buf := e.gzip.compress(body)
		splicers.Put(sb)
		reqBody = newPooledBody(buf.Bytes(), func() { e.gzip.release(buf) })
		encoding = "gzip"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.tracesURL, reqBody)
	if err != nil {
		_ = reqBody.Close()
		return consumererror.NewPermanent(fmt.Errorf("langfuse: building the request: %w", err))
	}
	req.ContentLength = int64(reqBody.Len())
	req.Header.Set("Content-Type", contentTypeProtobuf)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	req.Header.Set("Authorization", e.auth)
	req.Header.Set(headerIngestionVersion, ingestionVersion)
	req.Header.Set("User-Agent", e.userAgent)

	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("langfuse: sending %d spans: %w", td.SpanCount(), err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, maxResponseRead)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg := serverMessage(resp)
	status := resp.StatusCode
	switch {
	case status == http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w: %s", errTooLarge, msg)
	case status == http.StatusBadRequest:
		err := fmt.Errorf("langfuse rejected %d spans as invalid (HTTP 400): %s", td.SpanCount(), msg)
		e.logger.Error("Langfuse rejected a batch; it is not retried", zap.Int("spans", td.SpanCount()), zap.String("server_message", msg))
		return consumererror.NewPermanent(err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return consumererror.NewPermanent(credentialError(status, msg))
	case status == http.StatusTooManyRequests || status >= 500:
		err := fmt.Errorf("langfuse answered HTTP %d, will retry: %s", status, msg)
		if d, ok := retryafter.Parse(resp.Header.Get("Retry-After"), time.Now()); ok {
			return exporterhelper.NewThrottleRetry(err, d)
		}
		return err
	default:
		return consumererror.NewPermanent(fmt.Errorf("langfuse answered HTTP %d: %s", status, msg))
	}
}

// credentialError explains a 401/403 in terms of the settings a user can change.
func credentialError(status int, msg string) error {
	if status == http.StatusForbidden {
		return fmt.Errorf("langfuse refused the request (HTTP 403): %s; the project's ingestion may be suspended "+
			"or the key lacks access: check public_key/secret_key (%s, %s)", msg, EnvPublicKey, EnvSecretKey)
	}
	return fmt.Errorf("langfuse rejected the credentials (HTTP 401): %s; check public_key/secret_key (%s, %s) "+
		"and that endpoint is the key's region", msg, EnvPublicKey, EnvSecretKey)
}

// serverMessage extracts Langfuse's error text: the "message" (and "error") of its
// JSON error body, else the raw body, cut short.
func serverMessage(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))
	text := strings.TrimSpace(string(raw))
	var body struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil {
		switch {
		case body.Message != "":
			text = body.Message
		case len(body.Error) > 0:
			var s string
			if json.Unmarshal(body.Error, &s) == nil {
				text = s
			} else {
				text = string(body.Error)
			}
		}
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	if len(text) > maxServerMessage {
		text = text[:maxServerMessage] + "…"
	}
	return text
}

// splitTraces moves spans into two new batches, the first holding n spans, keeping
// each span's resource and scope.
func splitTraces(td ptrace.Traces, n int) (ptrace.Traces, ptrace.Traces) {
	first, second := ptrace.NewTraces(), ptrace.NewTraces()
	seen := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var dst [2]ptrace.ResourceSpans
		var have [2]bool
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			var dstSS [2]ptrace.ScopeSpans
			var haveSS [2]bool
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				side, out := 0, first
				if seen >= n {
					side, out = 1, second
				}
				seen++
				if !have[side] {
					dst[side] = out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(dst[side].Resource())
					dst[side].SetSchemaUrl(rs.SchemaUrl())
					have[side] = true
				}
				if !haveSS[side] {
					dstSS[side] = dst[side].ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dstSS[side].Scope())
					dstSS[side].SetSchemaUrl(ss.SchemaUrl())
					haveSS[side] = true
				}
				spans.At(k).CopyTo(dstSS[side].Spans().AppendEmpty())
			}
		}
	}
	return first, second
}
