package agentusage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langfuse"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langsmith"
)

// Formats reported to the receiver's obsreport metrics, one per face.
const (
	formatNative    = "agentusage_record"
	formatLangSmith = "langsmith_run"
	formatLFOTLP    = "langfuse_otlp"
	formatLFIngest  = "langfuse_ingestion"
)

type usageReceiver struct {
	cfg      *Config
	set      receiver.Settings
	next     consumer.Traces
	obs      *receiverhelper.ObsReport
	store    *pendingStore // nil unless `storage` is set (persist.go)
	runs     *langsmith.Translator
	lfEvents *langfuse.Ingester
	// runDisk and obsDisk are what each face holds on disk (persist.go), used under
	// runsMu and eventsMu
	runDisk *heldDisk[langsmith.Run]
	obsDisk *heldDisk[langfuse.Observation]
	keys    [][]byte

	// runsMu and eventsMu serialise plan → emit → commit per stateful face, so a PATCH
	// (or an update) handled concurrently with its POST (or create) always finds it.
	runsMu   sync.Mutex
	eventsMu sync.Mutex

	server   *http.Server
	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
	now      func() time.Time
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Traces) (*usageReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "http", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, fmt.Errorf("agentusage obsreport: %w", err)
	}
	r := &usageReceiver{
		cfg:      cfg,
		set:      set,
		next:     next,
		obs:      obs,
		runs:     langsmith.NewTranslator(cfg.PendingTimeout, cfg.MaxPending),
		lfEvents: langfuse.NewIngester(cfg.PendingTimeout, cfg.MaxPending),
		stop:     make(chan struct{}),
		now:      time.Now,
	}
	for _, k := range cfg.APIKeys {
		r.keys = append(r.keys, []byte(string(k)))
	}
	r.runDisk = newHeldDisk(r, "runs", prefixRun, runID, langsmith.EncodeRun, r.runs.Held)
	r.obsDisk = newHeldDisk(r, "observations", prefixObs, langfuse.StorageKey, encodeObservation, r.lfEvents.Held)
	return r, nil
}

// Start opens the listener and serves; a failure after start is reported to the host
// as a fatal status, as collector receivers do.
func (r *usageReceiver) Start(ctx context.Context, host component.Host) error {
	if r.cfg.Storage != nil && r.store == nil {
		st, err := startPendingStore(ctx, host, *r.cfg.Storage, r.set.ID)
		if err != nil {
			return fmt.Errorf("agentusage: %w", err)
		}
		r.store = st
		if err := r.restore(ctx); err != nil {
			return fmt.Errorf("agentusage: %w", err)
		}
	}
	ln, err := r.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("agentusage: listen on %s: %w", r.cfg.ServerConfig.NetAddr.Endpoint, err)
	}
	r.server, err = r.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), r.set.TelemetrySettings, r.handler())
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("agentusage: http server: %w", err)
	}
	r.set.Logger.Info("agentusage receiver listening", zap.String("endpoint", ln.Addr().String()))
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		if err := r.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	go func() {
		defer r.wg.Done()
		r.flushLoop()
	}()
	return nil
}

// Shutdown stops the server, then hands every still-unfinished run and observation to
// the pipeline as it is, so nothing acknowledged is silently lost at a clean stop.
func (r *usageReceiver) Shutdown(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() { close(r.stop) })
	if r.server != nil {
		err = r.server.Shutdown(ctx)
	}
	r.wg.Wait()
	if r.server != nil {
		// under the faces' locks: a request the server's Shutdown gave up on may still
		// be sending what it completes
		r.runsMu.Lock()
		r.emitRuns(ctx, r.runs.Drain(), drained)
		if rerr := r.runDisk.retry(ctx); rerr != nil {
			r.set.Logger.Error("agentusage: deleting LangSmith runs that went on from storage failed; the next start sends them again", zap.Error(rerr))
		}
		r.runsMu.Unlock()
		r.eventsMu.Lock()
		r.emitObservations(ctx, r.lfEvents.Drain(), drained)
		if rerr := r.obsDisk.retry(ctx); rerr != nil {
			r.set.Logger.Error("agentusage: deleting Langfuse observations that went on from storage failed; the next start sends them again", zap.Error(rerr))
		}
		r.eventsMu.Unlock()
	}
	if r.store != nil {
		err = errors.Join(err, r.store.client.Close(ctx))
	}
	return err
}

func (r *usageReceiver) flushLoop() {
	every := r.cfg.PendingTimeout / 4
	every = min(max(every, 50*time.Millisecond), 5*time.Second, langfuse.RootIdle/4)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			now := r.now()
			ctx := context.Background()
			r.runsMu.Lock()
			_ = r.runDisk.retry(ctx) // logged when it was first refused
			r.emitRuns(ctx, r.runs.Expired(now), timedOut)
			r.runsMu.Unlock()
			r.eventsMu.Lock()
			_ = r.obsDisk.retry(ctx)
			r.emitObservations(ctx, r.lfEvents.Expired(now), timedOut)
			r.eventsMu.Unlock()
		}
	}
}

// emitReason is why held runs or observations go on without their update; it decides
// what happens to them when storage or the pipeline refuses.
type emitReason int

const (
	timedOut emitReason = iota // the flush loop: held again when refused
	evicted                    // more were stored than max_pending at start: held again when refused
	drained                    // Shutdown: the next start holds what is still stored
)

// heldFace is what emitHeld needs of a stateful face.
type heldFace[T any] struct {
	name, format string
	build        func([]T) ptrace.Traces
	disk         *heldDisk[T]
	hold         func([]T, time.Time)
}

func (r *usageReceiver) runFace() heldFace[langsmith.Run] {
	return heldFace[langsmith.Run]{name: "LangSmith runs", format: formatLangSmith, build: r.runs.BuildRuns, disk: r.runDisk, hold: r.runs.Hold}
}

func (r *usageReceiver) observationFace() heldFace[langfuse.Observation] {
	return heldFace[langfuse.Observation]{name: "Langfuse observations", format: formatLFIngest, build: r.lfEvents.BuildObservations, disk: r.obsDisk, hold: r.lfEvents.Hold}
}

// emitRuns sends held runs that will get no PATCH (timeout, eviction at start, shutdown).
func (r *usageReceiver) emitRuns(ctx context.Context, runs []langsmith.Run, why emitReason) {
	emitHeld(ctx, r, r.runFace(), runs, why)
}

func (r *usageReceiver) emitObservations(ctx context.Context, obs []langfuse.Observation, why emitReason) {
	emitHeld(ctx, r, r.observationFace(), obs, why)
}

// emitHeld hands held items to the pipeline, then takes them off the disk. What the
// pipeline refuses is still stored: it is held again (past max_pending if it must; it
// held room before), so its update still finds it, and at Shutdown it waits on disk for
// the next start.
func emitHeld[T any](ctx context.Context, r *usageReceiver, f heldFace[T], items []T, why emitReason) {
	if len(items) == 0 {
		return
	}
	if err := r.consume(ctx, f.build(items), f.format); err != nil {
		r.set.Logger.Warn("agentusage: pipeline refused held entries; they stay held", zap.String("face", f.name), zap.Int("count", len(items)), zap.Error(err))
		if why != drained {
			f.hold(items, r.now())
		}
		return
	}
	f.disk.remove(ctx, items)
}

// consume hands spans to the pipeline, recording the outcome in obsreport.
func (r *usageReceiver) consume(ctx context.Context, td ptrace.Traces, format string) error {
	n := td.SpanCount()
	if n == 0 {
		return nil
	}
	ctx = r.obs.StartTracesOp(ctx)
	err := r.next.ConsumeTraces(ctx, td)
	r.obs.EndTracesOp(ctx, format, n, err)
	return err
}
