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
	keys     [][]byte

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
		r.emitRuns(ctx, r.runs.Drain(), false)
		r.emitObservations(ctx, r.lfEvents.Drain(), false)
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
			r.emitRuns(ctx, r.runs.Expired(now), true)
			r.runsMu.Unlock()
			r.eventsMu.Lock()
			r.emitObservations(ctx, r.lfEvents.Expired(now), true)
			r.eventsMu.Unlock()
		}
	}
}

// emitRuns sends parked runs that will get no PATCH (timeout, eviction, shutdown).
// A refused batch is parked again when repark is set, so it is retried later.
func (r *usageReceiver) emitRuns(ctx context.Context, runs []langsmith.Run, repark bool) {
	if len(runs) == 0 {
		return
	}
	if err := r.consume(ctx, r.runs.BuildRuns(runs), formatLangSmith); err != nil {
		r.set.Logger.Warn("agentusage: pipeline refused unfinished LangSmith runs", zap.Int("runs", len(runs)), zap.Error(err))
		if repark {
			r.emitRuns(ctx, r.runs.Repark(runs, r.now()), false)
		}
		return // with storage, still on disk: the next start holds them again
	}
	if err := r.syncRuns(ctx, nil, runs); err != nil {
		r.set.Logger.Warn("agentusage: deleting emitted runs from storage failed; a restart emits them again", zap.Error(err))
	}
}

func (r *usageReceiver) emitObservations(ctx context.Context, obs []langfuse.Observation, repark bool) {
	if len(obs) == 0 {
		return
	}
	if err := r.consume(ctx, r.lfEvents.BuildObservations(obs), formatLFIngest); err != nil {
		r.set.Logger.Warn("agentusage: pipeline refused unfinished Langfuse observations", zap.Int("observations", len(obs)), zap.Error(err))
		if repark {
			r.emitObservations(ctx, r.lfEvents.Repark(obs, r.now()), false)
		}
		return // with storage, still on disk: the next start holds them again
	}
	if err := r.syncObservations(ctx, nil, obs); err != nil {
		r.set.Logger.Warn("agentusage: deleting emitted observations from storage failed; a restart emits them again", zap.Error(err))
	}
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
