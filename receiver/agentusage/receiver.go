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
	r.runDisk = newHeldDisk(r, "runs", prefixRun, langsmith.StorageKey, langsmith.EncodeRun, r.runs.Held)
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
		drainHeld(ctx, r, r.runFace())
		drainHeld(ctx, r, r.observationFace())
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
			flushHeld(context.Background(), r, r.runFace(), now)
			flushHeld(context.Background(), r, r.observationFace(), now)
		}
	}
}

// whenRefused is what becomes of held items the pipeline refuses.
type whenRefused int

const (
	holdAgain   whenRefused = iota // the flush loop, and a start past max_pending: they held room before
	leaveStored                    // Shutdown: the next start holds what is still stored
)

// heldFace is a stateful face, for what is done to all it holds.
type heldFace[T any] struct {
	name, format string
	mu           *sync.Mutex // runsMu or eventsMu
	build        func([]T) ptrace.Traces
	disk         *heldDisk[T]
	hold         func([]T, time.Time)
	expired      func(time.Time) []T
	drain        func() []T
}

func (r *usageReceiver) runFace() heldFace[langsmith.Run] {
	return heldFace[langsmith.Run]{name: "LangSmith runs", format: formatLangSmith, mu: &r.runsMu, build: r.runs.BuildRuns,
		disk: r.runDisk, hold: r.runs.Hold, expired: r.runs.Expired, drain: r.runs.Drain}
}

func (r *usageReceiver) observationFace() heldFace[langfuse.Observation] {
	return heldFace[langfuse.Observation]{name: "Langfuse observations", format: formatLFIngest, mu: &r.eventsMu, build: r.lfEvents.BuildObservations,
		disk: r.obsDisk, hold: r.lfEvents.Hold, expired: r.lfEvents.Expired, drain: r.lfEvents.Drain}
}

// flushHeld tries the deletions f owes and sends what timed out.
func flushHeld[T any](ctx context.Context, r *usageReceiver, f heldFace[T], now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.disk.retry(ctx) // logged when it was first refused
	emitHeld(ctx, r, f, f.expired(now), holdAgain)
}

// drainHeld sends all f holds at Shutdown and tries the deletions it owes, under its
// lock: a request the server's Shutdown gave up on may still be sending what it
// completes.
func drainHeld[T any](ctx context.Context, r *usageReceiver, f heldFace[T]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	emitHeld(ctx, r, f, f.drain(), leaveStored)
	if err := f.disk.retry(ctx); err != nil {
		r.set.Logger.Error("agentusage: deleting held entries that went on from storage failed; the next start sends them again", zap.String("face", f.name), zap.Error(err))
	}
}

// emitHeld hands held items to the pipeline, then takes them off the disk. What the
// pipeline refuses is still stored: it is held again (past max_pending if it must; it
// held room before), so its update still finds it, and at Shutdown it waits on disk for
// the next start.
func emitHeld[T any](ctx context.Context, r *usageReceiver, f heldFace[T], items []T, refused whenRefused) {
	if len(items) == 0 {
		return
	}
	if err := r.consume(ctx, f.build(items), f.format); err != nil {
		r.set.Logger.Warn("agentusage: pipeline refused held entries; they stay held", zap.String("face", f.name), zap.Int("count", len(items)), zap.Error(err))
		if refused == holdAgain {
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
