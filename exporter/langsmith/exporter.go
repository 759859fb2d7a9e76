package langsmith

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	limits ingest.Limits // from /info; MaxBytes is only the starting value of maxBytes
	// maxBytes is the request byte limit in use: /info's size_limit_bytes, lowered when
	// the server answers 413 to a request below it (lowerByteLimit).
	maxBytes atomic.Int64
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
	e.maxBytes.Store(int64(bc.Limits.MaxBytes))
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

// push maps the spans to runs and sends them in chunks within the limits. On retryable
// failures it returns only the spans of the requests that were not delivered, so a retry
// never sends delivered runs again; a permanent failure of one request does not stop the
// others. A request refused with 413 is split in halves and resent (sendSplit).
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
	chunks := ingest.Split(encoded, e.currentLimits())
	results := make([][]sendResult, len(chunks))
	if len(chunks) == 1 {
		results[0] = e.sendSplit(ctx, chunks[0], nil)
	} else {
		sem := make(chan struct{}, maxInflightChunks)
		var wg sync.WaitGroup
		for i := range chunks {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				results[i] = e.sendSplit(ctx, chunks[i], nil)
			}()
		}
		wg.Wait()
	}

	var permanent, retryable []error
	var rest []runtree.SpanRef
	for _, rs := range results {
		for _, r := range rs {
			switch {
			case r.err == nil:
			case consumererror.IsPermanent(r.err):
				e.logger.Error("LangSmith refused a batch of runs; dropping them", zap.Int("runs", len(r.runs)), zap.Error(r.err))
				permanent = append(permanent, r.err)
			default:
				retryable = append(retryable, r.err)
				for j := range r.runs {
					rest = append(rest, r.runs[j].Source)
				}
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

// sendResult is the final answer for some runs: delivered (nil), permanent or retryable.
type sendResult struct {
	runs []ingest.Encoded
	err  error
}

// sendSplit sends runs in one request. On 413 it splits them in halves and sends each
// half the same way, one after the other, down to a single run, which is then a permanent
// error naming the run. Every request's outcome is appended to out, so the caller
// retries only the runs whose request failed retryably and never resends a delivered
// half. A 413 also lowers the byte limit later batches are cut by.
func (e *lsExporter) sendSplit(ctx context.Context, runs []ingest.Encoded, out []sendResult) []sendResult {
	err := e.client.Send(ctx, runs)
	if !errors.Is(err, ingest.ErrTooLarge) {
		return append(out, sendResult{runs, err})
	}
	if len(runs) == 1 {
		err = consumererror.NewPermanent(fmt.Errorf("run %s (%d bytes before compression) is over LangSmith's request size limit on its own; dropping it: %w",
			runs[0].ID, runs[0].Size(), err))
		return append(out, sendResult{runs, err})
	}
	e.lowerByteLimit(ingest.WireSize(runs))
	e.logger.Debug("LangSmith rejected a request as too large; splitting it", zap.Int("runs", len(runs)))
	half := len(runs) / 2
	out = e.sendSplit(ctx, runs[:half], out)
	return e.sendSplit(ctx, runs[half:], out)
}

// currentLimits are the limits the next batch is cut by.
func (e *lsExporter) currentLimits() ingest.Limits {
	return ingest.Limits{MaxRuns: e.limits.MaxRuns, MaxBytes: int(e.maxBytes.Load())}
}

// lowerByteLimit records that a request of size bytes (as Split counts them) got a 413:
// the server's real limit is below it, whatever /info announced (a proxy or an ingress in
// front of a self-hosted deployment often has a smaller body limit). Later batches are
// cut below that size, so they do not pay a 413 and a split again. The limit only goes
// down, and only multi-run requests lower it (a single run too large is not a request
// the limit could have avoided). Split counts bytes before compression, so with
// compression on the new limit is conservative.
func (e *lsExporter) lowerByteLimit(size int) {
	limit := int64(size - 1)
	for {
		cur := e.maxBytes.Load()
		if limit >= cur {
			return
		}
		if e.maxBytes.CompareAndSwap(cur, limit) {
			e.logger.Info("LangSmith refused a request below the byte limit in use; lowering it for later batches",
				zap.Int64("previous_size_limit_bytes", cur), zap.Int64("size_limit_bytes", limit))
			return
		}
	}
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
