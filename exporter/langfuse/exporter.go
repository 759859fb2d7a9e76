package langfuse

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"runtime"
	"slices"

	kgzip "github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
	"github.com/agentmeter/agentmeter/exporter/langfuse/internal/shape"
	"github.com/agentmeter/agentmeter/internal/otlpwire"
)

const (
	// headerIngestionVersion marks the exporter as v4-ready so Langfuse writes spans
	// straight to its events table instead of the ~10 min dual-write path.
	headerIngestionVersion = "x-langfuse-ingestion-version"
	ingestionVersion       = "4"
	contentTypeProtobuf    = "application/x-protobuf"
	maxResponseRead        = vendorhttp.MaxResponseRead
	maxServerMessage       = vendorhttp.MaxServerMessage
)

// vendor is Langfuse for the rules both vendor exporters share.
var vendor = vendorhttp.Vendor{Name: "langfuse", CredentialHint: credentialHint}

// credentialHint says what to check after a 401 or 403.
func credentialHint(status int) string {
	if status == http.StatusForbidden {
		return "the project's ingestion may be suspended or the key lacks access: check public_key/secret_key (" +
			EnvPublicKey + ", " + EnvSecretKey + ")"
	}
	return "check public_key/secret_key (" + EnvPublicKey + ", " + EnvSecretKey + ") and that endpoint is the key's region"
}

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
	compressor  *vendorhttp.Compressor // nil: bodies are sent uncompressed
	shaper      *shape.Shaper
	// revisions keeps an older version of a re-emitted span from replacing a newer one:
	// Langfuse keeps the version it received last
	revisions *vendorhttp.Revisions
	// persistent: the sending queue is on storage (convert builds the stored form)
	persistent bool
}

// defaultLevels: compression_params.level 0 is gzip's default level.
var defaultLevels = vendorhttp.Levels{Gzip: kgzip.DefaultCompression}

func newExporter(cfg *Config, set exporter.Settings) (*langfuseExporter, error) {
	comp, err := vendorhttp.NewCompressor(cfg.Compression, cfg.CompressionParams.Level, defaultLevels)
	if err != nil {
		return nil, fmt.Errorf("langfuse: %w", err)
	}
	return &langfuseExporter{
		cfg:         cfg,
		settings:    set.TelemetrySettings,
		logger:      set.Logger,
		tracesURL:   tracesURL(cfg.Endpoint),
		projectsURL: projectsURL(cfg.Endpoint),
		auth:        "Basic " + base64.StdEncoding.EncodeToString([]byte(string(cfg.PublicKey)+":"+string(cfg.SecretKey))),
		userAgent: fmt.Sprintf("agentmeter-langfuse-exporter/%s (%s/%s)",
			set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH),
		compressor: comp,
		shaper:     shape.NewShaper(shape.DefaultMaxTraces),
		revisions:  vendorhttp.NewRevisions(vendorhttp.DefaultMaxRevisions),
		persistent: cfg.QueueConfig.HasValue() && cfg.QueueConfig.Get().StorageID != nil,
	}, nil
}

func (e *langfuseExporter) start(ctx context.Context, host component.Host) error {
	// The exporter compresses bodies itself (pooled, at the configured level), so the
	// client must not compress again.
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
	e.compressor.Close()
	return nil
}

// convert shapes a batch for Langfuse (shape.Shaper: every span's Langfuse
// attributes) and encodes it with them spliced in, before it is queued: the queue holds
// what is sent. td itself is not changed.
//
// In front of a persistent queue the body is spliced straight behind the head of its
// stored form (queue_encoding.go), so storing it copies nothing more.
func (e *langfuseExporter) convert(ctx context.Context, td ptrace.Traces) (xexporterhelper.Request, error) {
	plan := e.shaper.Plan(td)
	defer plan.Release()
	// What the batch taught the trace memory is on disk before the batch is queued. A
	// write that fails does not fail the conversion (exporterhelper drops a batch whose
	// conversion fails, for good): the batch is queued and then refused, retryably
	// (vendorhttp.Unstored), and its values go with the next write, the retry's.
	if err := e.shaper.Write(ctx); err != nil {
		e.logger.Warn("the trace values of a batch are not on disk; the batch is queued and refused (retryable), and they go with the next write", zap.Error(err))
		vendorhttp.Unstored(ctx, fmt.Errorf("langfuse: trace values: %w", err))
	}
	raw, err := otlpwire.Encode(ctx, &e.marshaler, td) // read-only: the gather's too
	if err != nil {
		return nil, consumererror.NewPermanent(fmt.Errorf("langfuse: encoding spans: %w", err))
	}
	versions := slices.Clone(plan.Versions())
	var head, rc []byte
	if e.persistent {
		if rc, err = recordContext(ctx); err != nil {
			return nil, consumererror.NewPermanent(err)
		}
		head = appendRecordHead(make([]byte, 0, recordHeadLen(rc, versions)), rc, versions)
	}
	var sp shape.Splicer
	rec, err := sp.Splice(head, raw, plan)
	if err != nil {
		return nil, consumererror.NewPermanent(fmt.Errorf("langfuse: adding Langfuse attributes: %w", err))
	}
	r := newSpans(rec[len(head):], versions)
	if e.persistent {
		r.record, r.recordCtx = rec, rc
	}
	return r, nil
}

// push sends a queued batch (spans, shaped when it was queued).
//
// A re-emitted span (genai.IsReemission) goes out whole like any other: same span id and
// start time, so Langfuse replaces the observation's row with it. A version older than
// one sent before, and a first emission after a re-emission, are not sent, and a push
// carrying a re-emission waits for the pushes of its trace in flight: Langfuse keeps the
// version it received last (vendorhttp.Revisions).
//
// On 413 the batch is split in halves, recursively, until a single span is left
// (vendorhttp.Splitter). The result tells exporterhelper what to retry: only the parts
// that failed with a retryable error, so halves that went through are not sent again.
func (e *langfuseExporter) push(ctx context.Context, req xexporterhelper.Request) error {
	r, ok := req.(*spans)
	if !ok {
		return consumererror.NewPermanent(fmt.Errorf("langfuse: cannot send a %T", req))
	}
	keep, done, err := e.revisions.Begin(ctx, r.versions, false)
	defer done()
	if err != nil {
		return err // retried whole, after the push it waited for
	}
	var x *otlpwire.Index // built once a part of the batch is needed
	var xerr error        // why it could not be
	var idx []int32       // the spans that go, all of them while nil
	index := func() error {
		if x != nil || xerr != nil {
			return xerr
		}
		nx := new(otlpwire.Index)
		if err := r.index(nx); err != nil {
			xerr = consumererror.NewPermanent(err)
			return xerr
		}
		x = nx
		if idx == nil {
			idx = make([]int32, len(r.versions))
			for i := range idx {
				idx[i] = int32(i)
			}
		}
		return nil
	}
	if keep != nil {
		for i, ok := range keep {
			if ok {
				idx = append(idx, int32(i))
			}
		}
		e.logger.Debug("not sending older versions of re-emitted spans than ones sent before",
			zap.Int("spans", len(r.versions)-len(idx)))
		if len(idx) == 0 {
			return nil
		}
		if err := index(); err != nil {
			return err
		}
	}
	n := len(r.versions)
	if idx != nil {
		n = len(idx)
	}
	part := func(lo, hi int) ([][]byte, error) {
		if idx == nil && lo == 0 && hi == n {
			return r.parts, nil
		}
		if err := index(); err != nil {
			return nil, err
		}
		return [][]byte{x.Append(make([]byte, 0, x.Size(idx[lo:hi])), idx[lo:hi])}, nil
	}
	split := vendorhttp.Splitter{
		Send: func(ctx context.Context, lo, hi int) error {
			body, err := part(lo, hi)
			if err != nil {
				return err
			}
			return e.post(ctx, body, hi-lo)
		},
		OnSplit: func(lo, hi int, _ error) {
			e.logger.Debug("Langfuse rejected the batch as too large; splitting it", zap.Int("spans", hi-lo))
		},
		Alone: func(_ int, err error) error {
			return fmt.Errorf("%w: a single span is over the server's limit, dropping it", err)
		},
	}
	parts := split.Run(ctx, 0, n, nil)
	retry := func(err error, retry []vendorhttp.Part) error {
		rest := &spans{}
		for _, p := range retry {
			body, perr := part(p.Lo, p.Hi)
			if perr != nil {
				return perr
			}
			rest.parts = append(rest.parts, body...)
			rest.bytes += len(body[0])
			for _, i := range idx[p.Lo:p.Hi] { // a part of a batch: idx is set
				rest.versions = append(rest.versions, r.versions[i])
			}
		}
		return &retryParts{err: err, spans: rest}
	}
	dropped := func(p vendorhttp.Part) {
		if len(parts) > 1 {
			e.logger.Error("Dropping part of a split batch that Langfuse will not accept", zap.Int("spans", p.Hi-p.Lo), zap.Error(p.Err))
		}
	}
	return vendorhttp.FoldWith(parts, n, retry, dropped)
}

// post sends one OTLP/HTTP protobuf request of the given spans and classifies the answer
// (docs/contract.md#exporters): 2xx ok; 413 too large (push splits); 408, 425, 429, 5xx
// and network errors retryable (honouring Retry-After); 400, 401, 403 and every other
// status permanent.
func (e *langfuseExporter) post(ctx context.Context, body [][]byte, n int) error {
	encoding := ""
	var reqBody *vendorhttp.Body
	if e.compressor != nil {
		buf := e.compressor.Compress(body...)
		reqBody = vendorhttp.NewBody(buf.Bytes(), func() { e.compressor.Release(buf) })
		encoding = e.compressor.Encoding()
	} else {
		reqBody = vendorhttp.NewBody(bytes.Join(body, nil), nil)
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
		return vendor.NetworkError(err, fmt.Sprintf("sending %d spans", n))
	}
	defer vendorhttp.Drain(resp)
	if resp.StatusCode == http.StatusBadRequest {
		msg := serverMessage(resp)
		e.logger.Error("Langfuse rejected a batch; it is not retried", zap.Int("spans", n), zap.String("server_message", msg))
		return consumererror.NewPermanent(fmt.Errorf("langfuse rejected %d spans as invalid (HTTP 400): %s", n, msg))
	}
	return vendor.Classify(resp, "")
}

// serverMessage is Langfuse's error text: the "message" (or "error") of its JSON error
// body, else the raw body, cut short.
func serverMessage(resp *http.Response) string { return vendorhttp.ServerMessage(resp) }
