package middleware

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
)

// User-facing fallback messages (DeerFlow's LLMErrorHandlingMiddleware).
const (
	CircuitOpenMessage   = "The configured LLM provider is currently unavailable due to continuous failures. Circuit breaker is engaged to protect the system. Please wait a moment before trying again."
	QuotaMessage         = "The configured LLM provider rejected the request because the account is out of quota, billing is unavailable, or usage is restricted. Please check the provider account and try again."
	AuthMessage          = "The configured LLM provider rejected the request because authentication or access is invalid. Please check the API key and its permissions."
	BurstRateMessage     = "The configured LLM provider rejected the request because the request rate increased too quickly (burst-rate limit). Please wait a moment and continue the conversation."
	StreamTimeoutMessage = "The model's streaming response was interrupted before it could finish. Please split the work into smaller steps or shorten the request, then continue."
	TransientMessage     = "The configured LLM provider is temporarily unavailable after multiple retries. Please wait a moment and continue the conversation."
	genericMessagePrefix = "LLM request failed: "
	circuitOpenDetail    = "LLM circuit breaker is open"
	retryEventName       = "llm_retry"
)

// Error reasons.
const (
	ReasonQuota     = "quota"
	ReasonAuth      = "auth"
	ReasonBurstRate = "burst_rate"
	ReasonTransient = "transient"
	ReasonBusy      = "busy"
	ReasonGeneric   = "generic"
)

// ErrEmptyGeneration marks a response with no generations (DeerFlow's IndexError case).
var ErrEmptyGeneration = errors.New("model returned no generations")

var (
	quotaPatterns = []string{"insufficient_quota", "quota", "billing", "credit", "payment", "余额", "欠费", "配额"}
	authPatterns  = []string{"authentication", "unauthorized", "invalid api key", "invalid_api_key", "permission", "forbidden", "access denied", "认证", "鉴权", "无权限"}
	burstPatterns = []string{"limit_burst_rate", "rate increased too quickly", "burst rate", "突发"}
	busyPatterns  = []string{"server busy", "temporarily unavailable", "try again later", "please retry", "please try again", "overloaded", "high demand", "rate limit", "服务繁忙", "稍后重试"}
	transientHTTP = map[int]bool{408: true, 409: true, 425: true, 429: true, 500: true, 502: true, 503: true, 504: true}
)

// errorCode returns a provider error code when the error exposes one.
func errorCode(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return strings.ToLower(c.Code())
	}
	var c2 interface{ ErrorCode() string }
	if errors.As(err, &c2) {
		return strings.ToLower(c2.ErrorCode())
	}
	return ""
}

func containsAny(s string, pats []string) bool {
	for _, p := range pats {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// ClassifyError is DeerFlow's _classify_error: (retriable, reason), first match wins.
func ClassifyError(err error) (bool, string) {
	msg := strings.ToLower(err.Error())
	code := errorCode(err)
	var se *model.StatusError
	if errors.As(err, &se) {
		msg = strings.ToLower(se.Message) + " " + msg
	}
	switch {
	case containsAny(msg, quotaPatterns) || containsAny(code, quotaPatterns):
		return false, ReasonQuota
	case containsAny(msg, authPatterns):
		return false, ReasonAuth
	case containsAny(msg, burstPatterns) || containsAny(code, burstPatterns):
		return true, ReasonBurstRate
	case isTransientError(err):
		return true, ReasonTransient
	case se != nil && transientHTTP[se.StatusCode]:
		return true, ReasonTransient
	case containsAny(msg, busyPatterns):
		return true, ReasonBusy
	}
	return false, ReasonGeneric
}

// isTransientError covers DeerFlow's transient exception classes: timeouts, connection
// errors, read errors, protocol errors, stream-chunk timeouts and empty generations.
func isTransientError(err error) bool {
	if errors.Is(err, model.ErrStreamChunkTimeout) || errors.Is(err, ErrEmptyGeneration) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// errorTypeName is error_type: the Go type of the innermost error that is not a wrapper.
func errorTypeName(err error) string {
	switch {
	case errors.Is(err, model.ErrStreamChunkTimeout):
		return "StreamChunkTimeoutError"
	case errors.Is(err, ErrEmptyGeneration):
		return "IndexError"
	}
	var se *model.StatusError
	if errors.As(err, &se) {
		return "StatusError"
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	name := strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:] // the class name, as DeerFlow reports it
	}
	return name
}

// retryAfter reads Retry-After-Ms / Retry-After from errors exposing them (a
// RetryAfter() time.Duration method, or a Header() http.Header method); seconds, ms or an
// HTTP date. ok is false when the error carries none.
func retryAfter(err error, now time.Time) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		if d := ra.RetryAfter(); d > 0 {
			return d, true
		}
	}
	var hh interface{ Header() http.Header }
	if !errors.As(err, &hh) || hh.Header() == nil {
		return 0, false
	}
	h := hh.Header()
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d, true
			}
			return 0, true
		}
	}
	return 0, false
}

// limiter is the process-wide model-call concurrency cap, frozen at the first middleware
// construction (DeerFlow: later configs are ignored).
var (
	limiterMu     sync.Mutex
	limiterFrozen bool
	limiterSem    chan struct{}
)

func initLimiter(n int) {
	limiterMu.Lock()
	defer limiterMu.Unlock()
	if limiterFrozen {
		return
	}
	limiterFrozen = true
	if n > 0 {
		limiterSem = make(chan struct{}, n)
	}
}

func currentLimiter() chan struct{} {
	limiterMu.Lock()
	defer limiterMu.Unlock()
	return limiterSem
}

// LLMErrorHandlingMiddleware retries failed model calls with capped, decorrelated-jitter
// exponential backoff (honouring Retry-After), keeps a circuit breaker, and turns final
// failures into a user-facing fallback AI message (DeerFlow's LLMErrorHandlingMiddleware). Cancellation of
// the run is never swallowed.
type LLMErrorHandlingMiddleware struct {
	cfg     CircuitBreakerConfig
	clock   Clock
	breaker *CircuitBreaker
	// randInt returns a uniform integer in [lo, hi]; injectable for tests.
	randInt func(lo, hi int) int
}

// NewLLMErrorHandlingMiddleware validates cfg and returns the middleware.
func NewLLMErrorHandlingMiddleware(cfg CircuitBreakerConfig, clock Clock) (*LLMErrorHandlingMiddleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clock == nil {
		clock = SystemClock{}
	}
	initLimiter(cfg.MaxConcurrentCalls)
	return &LLMErrorHandlingMiddleware{
		cfg: cfg, clock: clock,
		breaker: NewCircuitBreaker(cfg.FailureThreshold, time.Duration(cfg.RecoveryTimeoutSec)*time.Second, clock.Now),
		randInt: func(lo, hi int) int { return lo + rand.IntN(hi-lo+1) },
	}, nil
}

// Name implements agent.Middleware.
func (*LLMErrorHandlingMiddleware) Name() string { return NameLLMErrorHandling }

// Breaker exposes the circuit breaker (tests, diagnostics).
func (m *LLMErrorHandlingMiddleware) Breaker() *CircuitBreaker { return m.breaker }

// maxAttemptsFor is the effective attempt budget: 2 for stream-chunk timeouts and burst
// throttling, never above retry_max_attempts.
func (m *LLMErrorHandlingMiddleware) maxAttemptsFor(err error, reason string) int {
	n := m.cfg.RetryMaxAttempts
	if errors.Is(err, model.ErrStreamChunkTimeout) || reason == ReasonBurstRate {
		n = min(n, 2)
	}
	return n
}

// RetryDelay is the backoff before the next attempt: Retry-After verbatim when present,
// else decorrelated jitter from the previous delay.
func (m *LLMErrorHandlingMiddleware) RetryDelay(err error, reason string, prev time.Duration) time.Duration {
	if d, ok := retryAfter(err, m.clock.Now()); ok {
		return d
	}
	base := m.cfg.BaseDelayMS
	if reason == ReasonBurstRate {
		base = m.cfg.BurstBaseDelayMS
	}
	seed := base
	if prev > 0 {
		seed = int(prev / time.Millisecond)
	}
	high := min(m.cfg.CapDelayMS, max(base, 3*seed))
	if high < base {
		return time.Duration(m.cfg.CapDelayMS) * time.Millisecond
	}
	return time.Duration(m.randInt(base, high)) * time.Millisecond
}

func reasonText(reason string) string {
	switch reason {
	case ReasonBusy:
		return "provider is busy"
	case ReasonBurstRate:
		return "provider is throttling request burst rate"
	default:
		return "provider request failed temporarily"
	}
}

// WrapModelCall implements agent.WrapModelCallHook.
func (m *LLMErrorHandlingMiddleware) WrapModelCall(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	probe := false
	if m.cfg.Enabled {
		var ok bool
		if ok, probe = m.breaker.Allow(); !ok {
			return journalFallback(req.Runtime, fallbackResponse(CircuitOpenMessage, "CircuitBreakerOpen", "circuit_open", circuitOpenDetail)), nil
		}
	}
	var prevDelay time.Duration
	for attempt := 1; ; attempt++ {
		resp, err := m.attempt(ctx, req, next)
		if err == nil {
			if m.cfg.Enabled {
				m.breaker.Success()
			}
			return resp, nil
		}
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			// Control flow (the run was cancelled): never swallowed, probe released.
			if probe {
				m.breaker.ReleaseProbe()
			}
			return nil, err
		}
		retriable, reason := ClassifyError(err)
		maxAttempts := m.maxAttemptsFor(err, reason)
		if retriable && attempt < maxAttempts {
			delay := m.RetryDelay(err, reason, prevDelay)
			prevDelay = delay
			ms := delay.Milliseconds()
			secs := max(1, int(math.Round(float64(ms)/1000)))
			emit(req.Runtime, retryEventName, map[string]any{
				"type": retryEventName, "attempt": attempt, "max_attempts": maxAttempts, "wait_ms": ms, "reason": reason,
				"message": fmt.Sprintf("LLM request retry %d/%d: %s. Retrying in %ds.", attempt, maxAttempts, reasonText(reason), secs),
			})
			if err := m.clock.Sleep(ctx, delay); err != nil {
				if probe {
					m.breaker.ReleaseProbe()
				}
				return nil, err
			}
			continue
		}
		if m.cfg.Enabled {
			if retriable && reason != ReasonBurstRate {
				m.breaker.Failure()
			} else if probe {
				m.breaker.ReleaseProbe()
			}
		}
		record(req.Runtime, "llm_error_handling", NameLLMErrorHandling, "wrap_model_call", "fallback",
			map[string]any{"error_type": errorTypeName(err), "error_reason": reason, "attempts": attempt})
		return journalFallback(req.Runtime, fallbackResponse(userMessage(err, reason), errorTypeName(err), reason, err.Error())), nil
	}
}

// journalFallback reports the fallback answer to the run journal like a response without
// usage, so the journal marks the run as ended by an LLM-error fallback (the gateway then
// finalises it with status error). No tokens are counted: no model answered.
func journalFallback(rt *agent.Runtime, resp *agent.ModelResponse) *agent.ModelResponse {
	if rt != nil && rt.Journal != nil {
		rt.Journal.OnLLMEnd("fallback:"+resp.Message.ID, rt.Caller, []message.Message{resp.Message}, 0)
	}
	return resp
}

// attempt runs one call under the process-wide limiter (the permit covers this attempt only).
func (m *LLMErrorHandlingMiddleware) attempt(ctx context.Context, req *agent.ModelRequest, next agent.ModelHandler) (*agent.ModelResponse, error) {
	if sem := currentLimiter(); sem != nil {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return next(ctx, req)
}

func userMessage(err error, reason string) string {
	switch reason {
	case ReasonQuota:
		return QuotaMessage
	case ReasonAuth:
		return AuthMessage
	case ReasonBurstRate:
		return BurstRateMessage
	case ReasonBusy, ReasonTransient:
		if errors.Is(err, model.ErrStreamChunkTimeout) {
			return StreamTimeoutMessage
		}
		return TransientMessage
	}
	return genericMessagePrefix + err.Error()
}

func fallbackResponse(content, errType, reason, detail string) *agent.ModelResponse {
	ai := message.AI(content)
	ai.AdditionalKwargs = map[string]any{
		message.KwargErrorFallback: true, "error_type": errType, "error_reason": reason, "error_detail": detail,
	}
	return &agent.ModelResponse{Message: ai}
}
