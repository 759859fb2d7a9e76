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

	"github.com/agentmeter/agentmeter/exporter/internal/vendorhttp"
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
	// revisions keeps an older version of a re-emitted span from being patched over a
	// newer one (LangSmith applies a run's patches in the order it receives them)
	revisions *vendorhttp.Revisions
	client    *ingest.Client
	limits    ingest.Limits // from /info; MaxBytes is only the starting value of maxBytes
	// maxBytes is the request byte limit in use: /info's size_limit_bytes, lowered when
	// the server answers 413 to a request below it (lowerByteLimit).
	maxBytes atomic.Int64
	// runBytes is the encoded size of a run in the last push, which sizes the next
	// push's buffer once: the pool is emptied by every garbage collection, and growing
	// a buffer by doubling to a batch's size allocates about twice that size.
	runBytes atomic.Int64
}

func newExporter(cfg *Config, set exporter.Settings) *lsExporter {
	return &lsExporter{
		cfg: cfg, set: set, logger: set.Logger,
		mapper:    runtree.NewMapper(cfg.Project, cfg.MaxCachedSpans),
		revisions: vendorhttp.NewRevisions(vendorhttp.DefaultMaxRevisions),
		bufs:      sync.Pool{New: func() any { return new([]byte) }},
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
	e.client, err = ingest.NewClientLevel(client, e.cfg.ClientConfig.Endpoint, string(e.cfg.APIKey), e.cfg.TenantID, comp,
		e.cfg.ClientConfig.CompressionParams.Level, e.logger)
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
	// the endpoint is not logged: a URL may carry credentials
	e.logger.Info("LangSmith exporter started", zap.String("project", e.cfg.Project),
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
// others. A request refused with 413 is split in halves and resent (vendorhttp.Splitter).
//
// A first emission is posted; a re-emission (genai.IsReemission) is sent whole as a patch
// of its run, never posted again (LangSmith answers a second post of an id with 409 and
// keeps the first). Posts go before patches, so within one push a run's post is answered
// before its patch is sent. An older version of a span than one already sent is not sent,
// and a push carrying a patch waits for the pushes of its trace in flight
// (vendorhttp.Revisions).
func (e *lsExporter) push(ctx context.Context, td ptrace.Traces) error {
	runs, skipped, release := e.mapper.MapReusing(td)
	if skipped > 0 {
		e.logger.Warn("dropped spans without a valid trace or span id", zap.Int("spans", skipped))
	}
	runs, done, err := e.newest(ctx, runs)
	defer done()
	if err != nil {
		release()
		return err // retried whole, after the push it waited for
	}
	bufp := e.bufs.Get().(*[]byte)
	if want := int(e.runBytes.Load()) * len(runs) * 9 / 8; cap(*bufp) < want {
		*bufp = make([]byte, 0, want)
	}
	encoded, buf := ingest.EncodeAll(runs, *bufp)
	release() // the runs are encoded: what is sent is buf
	if len(runs) > 0 {
		e.runBytes.Store(int64(len(buf) / len(runs)))
	}
	defer func() {
		// the runs' bytes are dead once every chunk was answered
		if cap(buf) <= maxPooledBuffer {
			*bufp = buf
			e.bufs.Put(bufp)
		}
	}()
	split := vendorhttp.Splitter{
		Send: func(ctx context.Context, lo, hi int) error { return e.client.Send(ctx, encoded[lo:hi]) },
		OnSplit: func(lo, hi int, _ error) {
			e.lowerByteLimit(ingest.WireSize(encoded[lo:hi]))
			e.logger.Debug("LangSmith rejected a request as too large; splitting it", zap.Int("runs", hi-lo))
		},
		Alone: func(i int, err error) error {
			return fmt.Errorf("run %s (%d bytes before compression) is over LangSmith's request size limit on its own; dropping it: %w",
				encoded[i].ID, encoded[i].Size(), err)
		},
	}
	posts := 0
	for posts < len(encoded) && !encoded[posts].Patch {
		posts++
	}
	placed := posts
	for placed < len(encoded) && !encoded[placed].Unplaced {
		placed++
	}
	parts := e.sendChunks(ctx, split, encoded, 0, posts, nil)
	parts = e.sendChunks(ctx, split, encoded, posts, placed, parts)
	parts = e.sendAlone(ctx, split, encoded, placed, len(encoded), parts)
	retryData := func(retry []vendorhttp.Part) ptrace.Traces {
		var refs []runtree.SpanRef
		for _, p := range retry {
			for i := p.Lo; i < p.Hi; i++ {
				refs = append(refs, encoded[i].Source)
			}
		}
		return vendorhttp.Subset(td, refs)
	}
	dropped := func(p vendorhttp.Part) {
		e.logger.Error("LangSmith refused a batch of runs; dropping them", zap.Int("runs", p.Hi-p.Lo), zap.Error(p.Err))
	}
	return vendorhttp.Fold(parts, len(encoded), retryData, dropped)
}

// newest keeps the runs that go out (every first emission, and of each re-emitted span
// its newest version not older than one sent before), in batch order within posts, then
// patches, then the updates LangSmith places.
func (e *lsExporter) newest(ctx context.Context, runs []runtree.Run) ([]runtree.Run, func(), error) {
	versions := make([]vendorhttp.Version, len(runs))
	patches := 0
	for i := range runs {
		versions[i] = runs[i].Version
		if runs[i].Version.Rev > 0 {
			patches++
		}
	}
	keep, done, err := e.revisions.Begin(ctx, versions, true)
	if err != nil {
		return nil, done, err
	}
	// a batch holding one first emission twice (a sender's retry of an accepted request)
	// posts it once: LangSmith refuses a request that posts a run id twice
	dup := duplicatePosts(runs)
	if keep == nil && patches == 0 && dup == nil {
		return runs, done, nil
	}
	// posts, then patches, then the updates LangSmith places (push sends each alone)
	kind := func(r *runtree.Run) int {
		switch {
		case r.Version.Rev == 0:
			return 0
		case !r.Head.Unplaced:
			return 1
		}
		return 2
	}
	// in place: the posts move up in order, the few re-emissions wait in later and
	// unplaced (a batch's runs are most of what mapping it allocates; a copy of them
	// would double it)
	w := 0
	var later, unplaced []runtree.Run
	for i := range runs {
		if (keep != nil && !keep[i]) || (dup != nil && dup[i]) {
			continue
		}
		switch kind(&runs[i]) {
		case 0:
			runs[w] = runs[i]
			w++
		case 1:
			later = append(later, runs[i])
		default:
			unplaced = append(unplaced, runs[i])
		}
	}
	out := append(append(runs[:w], later...), unplaced...)
	if n := len(runs) - len(out); n > 0 {
		e.logger.Debug("not sending duplicates, or older versions of re-emitted spans than ones sent before", zap.Int("runs", n))
	}
	return out, done, nil
}

// duplicatePosts marks every first emission of a run id that an earlier first emission
// of the batch already has; nil when there is none.
func duplicatePosts(runs []runtree.Run) []bool {
	seen := make(map[vendorhttp.SpanKey]struct{}, len(runs))
	var dup []bool
	for i := range runs {
		if runs[i].Version.Rev > 0 {
			continue
		}
		k := runs[i].Version.Key
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			continue
		}
		if dup == nil {
			dup = make([]bool, len(runs))
		}
		dup[i] = true
	}
	return dup
}

// sendChunks sends encoded[lo:hi] in chunks within the limits, up to maxInflightChunks
// side by side, and appends every request's outcome to out.
func (e *lsExporter) sendChunks(ctx context.Context, split vendorhttp.Splitter, encoded []ingest.Encoded, lo, hi int, out []vendorhttp.Part) []vendorhttp.Part {
	if lo == hi {
		return out
	}
	chunks := ingest.Split(encoded[lo:hi], e.currentLimits())
	if len(chunks) == 1 {
		return split.Run(ctx, lo, hi, out)
	}
	results := make([][]vendorhttp.Part, len(chunks))
	sem := make(chan struct{}, maxInflightChunks)
	var wg sync.WaitGroup
	for i, c := range chunks {
		start, end := lo, lo+len(c)
		lo = end
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = split.Run(ctx, start, end, nil)
		}()
	}
	wg.Wait()
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// sendAlone sends each of encoded[lo:hi] (updates LangSmith places, PATCH /runs/{id})
// by itself, one after the other, as the SDKs send single-run updates, so that a 404
// (its run not ingested yet) retries that update alone, never the chunks around it; every
// outcome is appended to out. Once one is refused retryably for another reason (a
// throttle, an outage), the rest are not sent: they fail with the same error and go with
// the retry, instead of going on into a rate limit LangSmith just announced.
func (e *lsExporter) sendAlone(ctx context.Context, split vendorhttp.Splitter, encoded []ingest.Encoded, lo, hi int, out []vendorhttp.Part) []vendorhttp.Part {
	split.Send = func(ctx context.Context, i, _ int) error { return e.client.PatchRun(ctx, &encoded[i]) }
	var stop error
	for i := lo; i < hi; i++ {
		if stop != nil {
			out = append(out, vendorhttp.Part{Lo: i, Hi: i + 1, Err: stop})
			continue
		}
		out = split.Run(ctx, i, i+1, out)
		if err := out[len(out)-1].Err; err != nil && !consumererror.IsPermanent(err) && !errors.Is(err, ingest.ErrRunNotIngested) {
			stop = err
		}
	}
	return out
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
