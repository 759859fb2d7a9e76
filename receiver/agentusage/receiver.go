package agentusage

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langfuse"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langsmith"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/native"
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

func (r *usageReceiver) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/usage", r.handleNative)
	for _, p := range []string{"", "/api/v1"} { // SaaS serves both; the Go SDK uses /api/v1
		mux.HandleFunc("GET "+p+"/info", r.handleInfo)
		mux.HandleFunc("POST "+p+"/runs", r.handleRunPost)
		mux.HandleFunc("PATCH "+p+"/runs/{id}", r.handleRunPatch)
		mux.HandleFunc("POST "+p+"/runs/batch", r.handleRunBatch)
		mux.HandleFunc("POST "+p+"/runs/multipart", r.handleRunMultipart)
	}
	mux.HandleFunc("POST /api/public/otel/v1/traces", r.handleLangfuseOTLP)
	mux.HandleFunc("POST /api/public/ingestion", r.handleLangfuseIngestion)
	mux.HandleFunc("GET /api/public/health", r.handleHealth)
	return r.recoverer(r.authenticate(mux))
}

// recoverer turns a panic in a handler into a 500: malformed input must never take the
// collector down. (The decoders are fuzzed; this is the last line.)
func (r *usageReceiver) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				r.set.Logger.Error("agentusage: handler panic", zap.String("path", req.URL.Path), zap.Any("panic", p))
				writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "internal error"})
			}
		}()
		h.ServeHTTP(w, req)
	})
}

// openPaths need no key: the vendors serve them without authentication and the SDKs
// probe them before sending anything.
var openPaths = map[string]bool{"/info": true, "/api/v1/info": true, "/api/public/health": true}

func (r *usageReceiver) authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if len(r.keys) == 0 || openPaths[req.URL.Path] || r.authorized(req) {
			h.ServeHTTP(w, req)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="agentusage"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "missing or invalid API key (x-api-key, Authorization: Bearer, or Basic)"})
	})
}

func (r *usageReceiver) authorized(req *http.Request) bool {
	var candidates []string
	if k := req.Header.Get("x-api-key"); k != "" {
		candidates = append(candidates, k)
	}
	if auth := req.Header.Get("Authorization"); auth != "" {
		scheme, cred, _ := strings.Cut(auth, " ")
		switch strings.ToLower(scheme) {
		case "bearer":
			candidates = append(candidates, strings.TrimSpace(cred))
		case "basic":
			if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
				pair := string(raw)
				candidates = append(candidates, pair)
				if _, secret, ok := strings.Cut(pair, ":"); ok {
					candidates = append(candidates, secret)
				}
			}
		}
	}
	ok := false
	for _, c := range candidates {
		for _, k := range r.keys {
			// compare all, constant time, so timing does not reveal which key nearly matched
			if subtle.ConstantTimeCompare([]byte(c), k) == 1 {
				ok = true
			}
		}
	}
	return ok
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads the (already decompressed) body; over max_request_body_size is 413.
func readBody(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		writeReadError(w, err)
		return nil, false
	}
	return body, true
}

func writeReadError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"message": fmt.Sprintf("request body larger than max_request_body_size (%d bytes)", mbe.Limit)})
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		writeJSON(w, http.StatusRequestTimeout, map[string]any{"message": "timed out reading the request body"})
		return
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"message": "reading request body: " + err.Error()})
}

// writeRefused answers a request whose spans the pipeline did not accept. A permanent
// error (the data can never be accepted) is 400; anything else is retryable, answered
// with status (429 or 503) and Retry-After so the SDK retries. Never a 2xx: nothing
// was accepted.
func (r *usageReceiver) writeRefused(w http.ResponseWriter, err error, status int) {
	if consumererror.IsPermanent(err) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "the pipeline rejected the data: " + err.Error()})
		return
	}
	secs := int((r.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeJSON(w, status, map[string]any{"message": "the pipeline is not accepting data right now, retry later: " + err.Error()})
}

func (r *usageReceiver) handleNative(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	res, err := native.Decode(body, r.now())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	resp := map[string]any{"accepted": res.Accepted, "rejected": len(res.Errors), "errors": nonNil(res.Errors)}
	if res.Accepted == 0 && len(res.Errors) > 0 {
		writeJSON(w, http.StatusBadRequest, resp)
		return
	}
	if err := r.consume(req.Context(), res.Traces, formatNative); err != nil {
		r.writeRefused(w, err, http.StatusServiceUnavailable)
		return
	}
	status := http.StatusOK
	if len(res.Errors) > 0 {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, resp)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handleInfo answers the SDKs' startup probe. batch_ingest_config keeps the SDKs on
// the multipart endpoint and within our body limit.
func (r *usageReceiver) handleInfo(w http.ResponseWriter, _ *http.Request) {
	limit := r.cfg.ServerConfig.MaxRequestBodySize
	if limit <= 0 {
		limit = 20 << 20
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"version":        "agentmeter-agentusage",
		"instance_flags": map[string]any{"gzip_body_enabled": true},
		"batch_ingest_config": map[string]any{
			"use_multipart_endpoint": true,
			"size_limit":             100,
			"size_limit_bytes":       limit,
		},
	})
}

func (r *usageReceiver) handleRunPost(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	op, err := langsmith.DecodeRun(body, false, "")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	r.ingestRuns(w, req, []langsmith.Op{op}, nil)
}

func (r *usageReceiver) handleRunPatch(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	op, err := langsmith.DecodeRun(body, true, req.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	r.ingestRuns(w, req, []langsmith.Op{op}, nil)
}

func (r *usageReceiver) handleRunBatch(w http.ResponseWriter, req *http.Request) {
	// read into a recycled buffer sized from Content-Length (as for multipart): the
	// ops point into it until the request is done
	ops, errs, release, err := langsmith.DecodeBatchPooled(req.Body, r.bodyHint(req))
	defer release()
	if err != nil {
		if errors.Is(err, langsmith.ErrBody) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		} else {
			writeReadError(w, err)
		}
		return
	}
	r.ingestRuns(w, req, ops, errs)
}

// bodyHint is the size to read a body into up front: its Content-Length, within the
// body limit (a client cannot make us allocate more than the limit up front).
func (r *usageReceiver) bodyHint(req *http.Request) int64 {
	limit := r.cfg.ServerConfig.MaxRequestBodySize
	if limit <= 0 {
		limit = 20 << 20
	}
	return min(req.ContentLength, limit)
}

func (r *usageReceiver) handleRunMultipart(w http.ResponseWriter, req *http.Request) {
	ops, errs, release, err := langsmith.DecodeMultipartPooled(req.Header.Get("Content-Type"), req.Body, r.bodyHint(req))
	defer release() // the ops point into the read buffer until the request is done
	if err != nil {
		if errors.Is(err, langsmith.ErrBody) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		} else {
			writeReadError(w, err)
		}
		return
	}
	r.ingestRuns(w, req, ops, errs)
}

// ingestRuns plans, emits and commits LangSmith run operations. LangSmith itself
// answers a batch all-or-nothing; we keep the good runs of a batch with bad items and
// say which were refused (207), because dropping valid usage for a bad neighbour loses
// tokens for good.
func (r *usageReceiver) ingestRuns(w http.ResponseWriter, req *http.Request, ops []langsmith.Op, errs []langsmith.ItemError) {
	if len(ops) == 0 && len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "no valid runs in the request", "errors": errs})
		return
	}
	// what each run's span needs from the run alone is read before the lock: only
	// placing runs against the shared stores has to go one request at a time
	prep := langsmith.Prepare(ops)
	defer prep.Release() // after the spans are built and the plan committed
	r.runsMu.Lock()
	plan := r.runs.Plan(ops)
	defer plan.Release()
	if err := r.consume(req.Context(), plan.Build(), formatLangSmith); err != nil {
		r.runsMu.Unlock()
		r.writeRefused(w, err, http.StatusServiceUnavailable)
		return
	}
	evicted := plan.Commit(r.now())
	serr := r.syncRuns(req.Context(), plan.Park, plan.Complete)
	r.runsMu.Unlock()
	r.emitRuns(context.WithoutCancel(req.Context()), evicted, false)
	if serr != nil {
		// held in memory, not on disk: ask the SDK to send again (its retry is merged
		// into the held runs by id)
		r.set.Logger.Error("agentusage: storing held runs failed; answering 503", zap.Error(serr))
		r.writeRefused(w, serr, http.StatusServiceUnavailable)
		return
	}
	resp := map[string]any{"accepted": len(ops), "errors": nonNil(errs)}
	if len(errs) > 0 {
		writeJSON(w, http.StatusMultiStatus, resp)
		return
	}
	writeJSON(w, http.StatusAccepted, resp)
}

func (r *usageReceiver) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK", "version": "agentmeter-agentusage"})
}

func (r *usageReceiver) handleLangfuseOTLP(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	td, err := langfuse.DecodeOTLP(req.Header.Get("Content-Type"), body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	if err := r.consume(req.Context(), td, formatLFOTLP); err != nil {
		r.writeRefused(w, err, http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// handleLangfuseIngestion answers like Langfuse: 207 with per-event successes and
// errors for a well-formed batch, 400 when the body is not a batch at all.
func (r *usageReceiver) handleLangfuseIngestion(w http.ResponseWriter, req *http.Request) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	events, errs, err := langfuse.DecodeIngestion(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid request data", "errors": []string{err.Error()}})
		return
	}
	r.eventsMu.Lock()
	plan := r.lfEvents.Plan(events)
	if err := r.consume(req.Context(), plan.Build(), formatLFIngest); err != nil {
		r.eventsMu.Unlock()
		r.writeRefused(w, err, http.StatusTooManyRequests)
		return
	}
	evicted := plan.Commit(r.now())
	serr := r.syncObservations(req.Context(), append(append([]langfuse.Observation(nil), plan.Park...), plan.Roots...), plan.Complete)
	r.eventsMu.Unlock()
	r.emitObservations(context.WithoutCancel(req.Context()), evicted, false)
	if serr != nil {
		r.set.Logger.Error("agentusage: storing held observations failed; answering 503", zap.Error(serr))
		r.writeRefused(w, serr, http.StatusServiceUnavailable)
		return
	}
	resp := langfuse.Response{Successes: []langfuse.Success{}, Errors: nonNil(errs)}
	for _, ev := range events {
		resp.Successes = append(resp.Successes, langfuse.Success{ID: ev.ID, Status: http.StatusCreated})
	}
	writeJSON(w, http.StatusMultiStatus, resp)
}
