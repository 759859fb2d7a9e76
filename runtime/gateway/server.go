package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// Lead is what the factory returns for one run: the lead agent (reusable and safe for
// concurrent runs), the thread's sandbox and the model name recorded on the run row.
type Lead struct {
	Agent     *agent.Agent
	Sandbox   sandbox.Sandbox
	ModelName string
}

// AgentFactory builds (or returns a cached) lead agent for a run of threadID.
type AgentFactory func(ctx context.Context, threadID string) (Lead, error)

// Options configure a Server.
type Options struct {
	Config Config
	Store  store.RunStore
	Agents AgentFactory
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// RunContext is the parent of every run's context (telemetry settings live in it);
	// default context.Background(). Cancelling it cancels all runs.
	RunContext context.Context
	// ContextWindow returns the configured context_window of a model name (0 when
	// unknown), for context_usage; DefaultModel is used when a thread has no run yet.
	ContextWindow func(modelName string) int
	DefaultModel  string
	// FallbackTitle titles a thread whose first run was interrupted before the title
	// middleware ran (DeerFlow's worker does this, partial exchange allowed), from the
	// user's message; nil: no title for such threads.
	FallbackTitle func(userMessage string) string
	// Uploads returns a thread's uploads folder for a user (where UploadsMiddleware looks
	// for them); nil: no uploads (multipart files and POST .../uploads answer 501).
	Uploads func(userID, threadID string) (string, error)
	// Pricer prices each run's calls for the journal's cost keys (docs/cost.md); nil: no cost.
	Pricer journal.Pricer
}

// Server is the gateway. Create with New, serve with Serve, stop with Shutdown.
type Server struct {
	cfg     Config
	store   store.RunStore
	agents  AgentFactory
	log     *slog.Logger
	auth    *authenticator
	metrics *metrics
	handler http.Handler
	httpSrv *http.Server

	ctxWindow     func(string) int
	defaultModel  string
	uploads       func(userID, threadID string) (string, error)
	fallbackTitle func(string) string
	pricer        journal.Pricer

	runCtx    context.Context
	cancelAll context.CancelCauseFunc
	closing   atomic.Bool
	runsWG    sync.WaitGroup

	// owner names this process in the store's run leases.
	owner     string
	stopSched chan struct{}
	stopOnce  sync.Once
	schedDone chan struct{}

	mu      sync.Mutex
	active  map[string]*activeRun      // executing in this process
	recent  map[string]*activeRun      // finished, kept for stream replay
	order   []string                   // recent, oldest first
	waiters map[string][]chan struct{} // run → the waits for it (awaitFinal)
	context map[string]contextTokens
}

// maxRecentRuns bounds the finished runs whose event logs are kept for late streams.
const maxRecentRuns = 1024

// errShutdown is the cancellation cause of runs still going at the shutdown deadline.
var errShutdown = errors.New("gateway shut down before the run finished")

// errCancelled is the cause of a user's cancel request.
var errCancelled = errors.New("run cancelled by request")

// New validates the config, resolves the API keys, builds the routes and starts the
// scheduler that executes the runs of the store's line (stopped by Shutdown).
func New(o Options) (*Server, error) {
	cfg := o.Config
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if o.Store == nil || o.Agents == nil {
		return nil, errors.New("gateway: a store and an agent factory are required")
	}
	auth, err := newAuthenticator(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	parent := o.RunContext
	if parent == nil {
		parent = context.Background()
	}
	runCtx, cancel := context.WithCancelCause(parent)
	s := &Server{
		cfg: cfg, store: o.Store, agents: o.Agents, log: log, auth: auth, metrics: newMetrics(),
		ctxWindow: o.ContextWindow, defaultModel: o.DefaultModel, uploads: o.Uploads, fallbackTitle: o.FallbackTitle, pricer: o.Pricer,
		runCtx: runCtx, cancelAll: cancel,
		owner: ownerName(), stopSched: make(chan struct{}), schedDone: make(chan struct{}),
		active: map[string]*activeRun{}, recent: map[string]*activeRun{}, waiters: map[string][]chan struct{}{}, context: map[string]contextTokens{},
	}
	if s.ctxWindow == nil {
		s.ctxWindow = func(string) int { return 0 }
	}
	s.handler = s.routes()
	go s.schedule()
	return s, nil
}

// LocalMode reports whether no api_keys are configured (one local user, loopback only).
func (s *Server) LocalMode() bool { return s.auth.local }

// Handler is the gateway's HTTP handler (tests use it with httptest).
func (s *Server) Handler() http.Handler { return s.handler }

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway.listen %s: %w", s.cfg.Listen, err)
	}
	return ln, nil
}

// Serve answers requests on ln until Shutdown; it returns nil after a clean shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.httpSrv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	srv := s.httpSrv
	s.mu.Unlock()
	if s.auth.local {
		s.log.Info("gateway: no api_keys configured: serving one local user on loopback only", "addr", ln.Addr().String(), "user", LocalUser)
	} else {
		s.log.Info("gateway: listening", "addr", ln.Addr().String(), "api_keys", len(s.auth.keys))
	}
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, scope string, h func(http.ResponseWriter, *http.Request, Principal)) {
		route := pattern[strings.IndexByte(pattern, ' ')+1:]
		mux.Handle(pattern, s.instrument(route, s.authorize(scope, h)))
	}
	handle("POST /api/threads", ScopeThreadsWrite, s.createThread)
	handle("GET /api/threads/{thread_id}", ScopeThreadsRead, s.getThread)
	handle("POST /api/threads/{thread_id}/runs", ScopeThreadsWrite, s.createRun)
	handle("GET /api/threads/{thread_id}/runs/{run_id}", ScopeThreadsRead, s.getRun)
	handle("GET /api/threads/{thread_id}/runs/{run_id}/stream", ScopeThreadsRead, s.streamRun)
	handle("POST /api/threads/{thread_id}/runs/{run_id}/cancel", ScopeThreadsWrite, s.cancelRun)
	handle("GET /api/threads/{thread_id}/runs/{run_id}/events", ScopeThreadsRead, s.runEvents)
	handle("GET /api/threads/{thread_id}/state", ScopeThreadsRead, s.threadState)
	handle("POST /api/threads/{thread_id}/uploads", ScopeThreadsWrite, s.uploadFiles)
	handle("GET /api/threads/{thread_id}/token-usage", ScopeThreadsRead, s.tokenUsage)
	mux.Handle("GET /metrics", s.instrument("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /healthz", s.instrument("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if s.closing.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})))
	return mux
}

// statusRecorder remembers the response code for the request counter.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	})
}

// authorize checks the key and its scope (docs/gateway.md#api) and validates path ids
// (400 for malformed ones, before anything is looked up).
func (s *Server) authorize(scope string, h func(http.ResponseWriter, *http.Request, Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.auth.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentmeter"`)
			writeError(w, http.StatusUnauthorized, "Authentication required")
			return
		}
		if !p.Has(scope) {
			writeError(w, http.StatusForbidden, "Permission denied: %s", scope)
			return
		}
		for _, name := range []string{"thread_id", "run_id"} {
			if v := r.PathValue(name); v != "" && !validID(v) {
				writeError(w, http.StatusBadRequest, "invalid %s: ids are 1-128 characters of letters, digits, '.', '_', ':' and '-', starting with a letter or digit", name)
				return
			}
		}
		h(w, r, p)
	})
}

// checkOwner is the owner check in DeerFlow's permissive mode: allowed when no thread row
// exists (legacy), the row has no owner (shared) or the caller owns it. Otherwise it
// writes 404 — never 403, so a thread's existence is not revealed — and returns false.
func (s *Server) checkOwner(w http.ResponseWriter, r *http.Request, p Principal, threadID string) (store.Thread, bool, bool) {
	t, err := s.store.GetThread(r.Context(), threadID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Thread{}, false, true
	}
	if err != nil {
		s.internalError(w, "read thread", err)
		return store.Thread{}, false, false
	}
	if t.UserID != "" && t.UserID != p.UserID {
		writeError(w, http.StatusNotFound, "Thread %s not found", threadID)
		return store.Thread{}, false, false
	}
	return t, true, true
}

func (s *Server) internalError(w http.ResponseWriter, what string, err error) {
	s.log.Error("gateway: "+what, "error", err)
	writeError(w, http.StatusInternalServerError, "internal error: %s failed", what)
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type createThreadRequest struct {
	ThreadID string `json:"thread_id"`
}

type threadResponse struct {
	store.Thread
	Runs []store.Run `json:"runs"`
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request, p Principal) {
	var req createThreadRequest
	if !s.decodeBody(w, r, &req, true) {
		return
	}
	if req.ThreadID == "" {
		req.ThreadID = newID("thread-")
	} else if !validID(req.ThreadID) {
		writeError(w, http.StatusBadRequest, "invalid thread_id: ids are 1-128 characters of letters, digits, '.', '_', ':' and '-', starting with a letter or digit")
		return
	}
	t := store.Thread{ID: req.ThreadID, UserID: p.UserID, CreatedAt: time.Now().UTC()}
	if err := s.store.CreateThread(r.Context(), t); err != nil {
		if errors.Is(err, store.ErrExists) {
			writeError(w, http.StatusConflict, "Thread %s already exists", req.ThreadID)
			return
		}
		s.internalError(w, "create thread", err)
		return
	}
	writeJSON(w, http.StatusCreated, threadResponse{Thread: t, Runs: []store.Run{}})
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("thread_id")
	t, exists, ok := s.checkOwner(w, r, p, id)
	if !ok {
		return
	}
	if !exists {
		writeError(w, http.StatusNotFound, "Thread %s not found", id)
		return
	}
	runs, err := s.store.ListRuns(r.Context(), id)
	if err != nil {
		s.internalError(w, "list runs", err)
		return
	}
	if runs == nil {
		runs = []store.Run{}
	}
	writeJSON(w, http.StatusOK, threadResponse{Thread: t, Runs: runs})
}

// findRun returns the thread's run or writes 404.
func (s *Server) findRun(w http.ResponseWriter, r *http.Request, p Principal) (store.Run, bool) {
	threadID, runID := r.PathValue("thread_id"), r.PathValue("run_id")
	if _, _, ok := s.checkOwner(w, r, p, threadID); !ok {
		return store.Run{}, false
	}
	run, err := s.store.GetRun(r.Context(), runID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && run.ThreadID != threadID) {
		writeError(w, http.StatusNotFound, "Run %s not found", runID)
		return store.Run{}, false
	}
	if err != nil {
		s.internalError(w, "read run", err)
		return store.Run{}, false
	}
	return run, true
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, p Principal) {
	if run, ok := s.findRun(w, r, p); ok {
		writeJSON(w, http.StatusOK, run)
	}
}

// ContextUsage is the token-usage response's context_usage.
type ContextUsage struct {
	TokenCount       int64    `json:"token_count"`
	MaxContextTokens *int64   `json:"max_context_tokens"`
	Percentage       *PyFloat `json:"percentage"`
}

// PyFloat is a float that serialises the way Python's json module writes a float:
// always with a fraction (DeerFlow's percentage = round(x, 1) is 33.0, never 33).
type PyFloat float64

// MarshalJSON implements json.Marshaler.
func (f PyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("percentage %v is not a JSON number", v)
	}
	b := strconv.AppendFloat(nil, v, 'f', -1, 64)
	if !bytes.ContainsAny(b, ".eE") {
		b = append(b, ".0"...)
	}
	return b, nil
}

// TokenUsageResponse is the exact body of DeerFlow's token-usage response
// (docs/gateway.md#api).
type TokenUsageResponse struct {
	ThreadID string `json:"thread_id"`
	store.TokenUsage
	ContextUsage *ContextUsage `json:"context_usage"`
}

func (s *Server) tokenUsage(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("thread_id")
	includeActive := false
	if v := r.URL.Query().Get("include_active"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "include_active must be true or false, got %q", v)
			return
		}
		includeActive = b
	}
	if _, _, ok := s.checkOwner(w, r, p, id); !ok {
		return
	}
	u, err := s.store.AggregateTokensByThread(r.Context(), id, includeActive)
	if err != nil {
		s.internalError(w, "aggregate token usage", err)
		return
	}
	writeJSON(w, http.StatusOK, TokenUsageResponse{ThreadID: id, TokenUsage: u, ContextUsage: s.contextUsage(r.Context(), id)})
}

// contextTokens is the size of a thread's context after its latest lead-agent model
// call: that call's input plus output tokens, the closest measure of "the latest
// materialised checkpoint messages" we have (DeerFlow counts them approximately).
type contextTokens struct {
	tokens int64
	model  string
}

// contextUsage builds context_usage, or nil when unknown (no run in this process yet):
// DeerFlow answers null on any failure, never an error.
func (s *Server) contextUsage(ctx context.Context, threadID string) *ContextUsage {
	s.mu.Lock()
	ct, ok := s.context[threadID]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	model, err := s.store.LatestRunModel(ctx, threadID)
	if err != nil || model == "" {
		model = ct.model
	}
	if model == "" {
		model = s.defaultModel
	}
	return buildContextUsage(ct.tokens, s.ctxWindow(model))
}

// buildContextUsage is DeerFlow's build_context_usage_payload: percentage =
// round(count/max*100, 1) when max > 0, else null.
func buildContextUsage(count int64, maxTokens int) *ContextUsage {
	cu := &ContextUsage{TokenCount: count}
	if maxTokens > 0 {
		m := int64(maxTokens)
		pct := PyFloat(math.Round(float64(count)/float64(m)*1000) / 10)
		cu.MaxContextTokens, cu.Percentage = &m, &pct
	}
	return cu
}
