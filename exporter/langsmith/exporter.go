package langsmith

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/ingest"
	"github.com/agentmeter/agentmeter/exporter/langsmith/internal/runtree"
)

// startCallTimeout bounds the /info and credential calls at start, like the JS SDK's 10 s.
const startCallTimeout = 10 * time.Second

// maxPooledBuffer keeps one huge batch from pinning its buffer forever.
const maxPooledBuffer = 8 << 20

type lsExporter struct {
	bufs   sync.Pool // *[]byte run-encoding buffers
	cfg    *Config
	set    exporter.Settings
	logger *zap.Logger
	mapper *runtree.Mapper
	client *ingest.Client
	limits ingest.Limits
}

func newExporter(cfg *Config, set exporter.Settings) *lsExporter {
	return &lsExporter{
		cfg: cfg, set: set, logger: set.Logger,
		mapper: runtree.NewMapper(cfg.Project, cfg.MaxCachedSpans),
		bufs:   sync.Pool{New: func() any { return new([]byte) }},
	}
}

func (e *lsExporter) start(ctx context.Context, host component.Host) error {
	// compression is applied by the ingest client to multipart bodies only; confighttp
	// would compress every request, GETs and the /runs/batch fallback included
	hc := e.cfg.ClientConfig
	hc.Compression = ""
	client, err := hc.ToClient(ctx, host.GetExtensions(), e.set.TelemetrySettings)
	if err != nil {
		return fmt.Errorf("langsmith http client: %w", err)
	}
	comp, err := bodyCompression(e.cfg.ClientConfig.Compression)
	if err != nil {
		return err
	}
	e.client, err = ingest.NewClient(client, e.cfg.ClientConfig.Endpoint, string(e.cfg.APIKey), e.cfg.TenantID, comp, e.logger)
	if err != nil {
		return fmt.Errorf("langsmith ingest client: %w", err)
	}

	infoCtx, cancel := context.WithTimeout(ctx, startCallTimeout)
	bc, err := e.client.Info(infoCtx)
	cancel()
	if err != nil {
		e.logger.Warn("LangSmith /info unavailable; using default batch limits", zap.Error(err),
			zap.Int("size_limit", bc.Limits.MaxRuns), zap.Int("size_limit_bytes", bc.Limits.MaxBytes))
	}
	e.limits = bc.Limits
	if !bc.UseMultipart {
		e.client.UseBatchEndpoint()
	}
	e.logger.Info("LangSmith exporter started",
		zap.String("endpoint", e.cfg.ClientConfig.Endpoint), zap.String("project", e.cfg.Project),
		zap.Int("size_limit", e.limits.MaxRuns), zap.Int("size_limit_bytes", e.limits.MaxBytes),
		zap.Bool("batch_endpoint", e.client.UsesBatchEndpoint()))

	if e.cfg.CheckCredentials {
		ccCtx, cancel := context.WithTimeout(ctx, startCallTimeout)
		err := e.client.CheckCredentials(ccCtx)
		cancel()
		switch {
		case errors.Is(err, ingest.ErrCredentials):
			return fmt.Errorf("langsmith check_credentials: %w", err)
		case err != nil:
			// an unreachable server must not keep the collector down; sends will retry
			e.logger.Warn("LangSmith credential check could not complete; continuing", zap.Error(err))
		}
	}
	return nil
}

func (e *lsExporter) shutdown(context.Context) error {
	if e.client != nil {
		e.client.Close()
	}
	return nil
}

// maxInflightChunks bounds the requests one export has in flight: a big batch is cut
// into several requests by the /info limits, and sending them side by side overlaps the
// encoding and compression of one with the network wait of another.
const maxInflightChunks = 4

// push maps the spans to runs and sends them in chunks within the /info limits. On
// retryable failures it returns only the spans of the chunks that were not delivered, so
// a retry never sends a delivered chunk again; a permanent failure of one chunk does not
// stop the others.
func (e *lsExporter) push(ctx context.Context, td ptrace.Traces) error {
	runs, skipped := e.mapper.Map(td)
	if skipped > 0 {
		e.logger.Warn("dropped spans without a valid trace or span id", zap.Int("spans", skipped))
	}
	bufp := e.bufs.Get().(*[]byte)
	encoded, buf := ingest.EncodeAll(runs, *bufp)
	defer func() {
		// the runs' bytes are dead once every chunk was answered
		if cap(buf) <= maxPooledBuffer {
			*bufp = buf
			e.bufs.Put(bufp)
		}
	}()
	chunks := ingest.Split(encoded, e.limits)
	errs := make([]error, len(chunks))
	if len(chunks) == 1 {
		errs[0] = e.client.Send(ctx, chunks[0])
	} else {
		sem := make(chan struct{}, maxInflightChunks)
		var wg sync.WaitGroup
		for i := range chunks {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = e.client.Send(ctx, chunks[i])
			}()
		}
		wg.Wait()
	}

	var permanent, retryable []error
	var rest []runtree.SpanRef
	for i, err := range errs {
		switch {
		case err == nil:
		case consumererror.IsPermanent(err):
			e.logger.Error("LangSmith refused a batch of runs; dropping them", zap.Int("runs", len(chunks[i])), zap.Error(err))
			permanent = append(permanent, err)
		default:
			retryable = append(retryable, err)
			for j := range chunks[i] {
				rest = append(rest, chunks[i][j].Source)
			}
		}
	}
	switch {
	case len(retryable) > 0 && len(rest) == len(runs):
		return retryable[0] // nothing delivered: retry the request as it is
	case len(retryable) > 0:
		// keep the first error as is: it may carry a Retry-After throttle
		return consumererror.NewTraces(retryable[0], subset(td, rest))
	case len(permanent) > 0:
		return consumererror.NewPermanent(errors.Join(permanent...))
	}
	return nil
}

// subset copies the referenced spans, with their resource and scope, into new traces.
func subset(td ptrace.Traces, refs []runtree.SpanRef) ptrace.Traces {
	out := ptrace.NewTraces()
	type scopeKey struct{ r, s int }
	resources := map[int]ptrace.ResourceSpans{}
	scopes := map[scopeKey]ptrace.ScopeSpans{}
	for _, ref := range refs {
		srcRS := td.ResourceSpans().At(ref.Resource)
		rs, ok := resources[ref.Resource]
		if !ok {
			rs = out.ResourceSpans().AppendEmpty()
			srcRS.Resource().CopyTo(rs.Resource())
			rs.SetSchemaUrl(srcRS.SchemaUrl())
			resources[ref.Resource] = rs
		}
		srcSS := srcRS.ScopeSpans().At(ref.Scope)
		ss, ok := scopes[scopeKey{ref.Resource, ref.Scope}]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			srcSS.Scope().CopyTo(ss.Scope())
			ss.SetSchemaUrl(srcSS.SchemaUrl())
			scopes[scopeKey{ref.Resource, ref.Scope}] = ss
		}
		srcSS.Spans().At(ref.Span).CopyTo(ss.Spans().AppendEmpty())
	}
	return out
}
