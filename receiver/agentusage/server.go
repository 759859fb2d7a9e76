package agentusage

import (
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
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"
)

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

// bodyHint is the size to read a body into up front: its Content-Length, within the
// body limit (a client cannot make us allocate more than the limit up front).
func (r *usageReceiver) bodyHint(req *http.Request) int64 {
	limit := r.cfg.ServerConfig.MaxRequestBodySize
	if limit <= 0 {
		limit = 20 << 20
	}
	return min(req.ContentLength, limit)
}

func (r *usageReceiver) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK", "version": "agentmeter-agentusage"})
}
