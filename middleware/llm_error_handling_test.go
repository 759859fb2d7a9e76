package middleware

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
)

type codedErr struct {
	msg, code string
}

func (e codedErr) Error() string { return e.msg }
func (e codedErr) Code() string  { return e.code }

type retryAfterErr struct {
	h http.Header
}

func (e retryAfterErr) Error() string       { return "rate limit: slow down" }
func (e retryAfterErr) Header() http.Header { return e.h }

func llmMW(t *testing.T, clock Clock, mut func(*CircuitBreakerConfig)) *LLMErrorHandlingMiddleware {
	t.Helper()
	cfg := DefaultCircuitBreakerConfig()
	if mut != nil {
		mut(&cfg)
	}
	m, err := NewLLMErrorHandlingMiddleware(cfg, clock)
	require.NoError(t, err)
	return m
}

// failingHandler fails with errs[i] on attempt i, then succeeds.
func failingHandler(calls *int, errs ...error) agent.ModelHandler {
	return func(context.Context, *agent.ModelRequest) (*agent.ModelResponse, error) {
		i := *calls
		*calls++
		if i < len(errs) && errs[i] != nil {
			return nil, errs[i]
		}
		return &agent.ModelResponse{Message: aiMsg("ok", "fine")}, nil
	}
}

func TestLLMRetriesBusyProviderThenSucceeds(t *testing.T) {
	clock := newFakeClock()
	m := llmMW(t, clock, func(c *CircuitBreakerConfig) { c.BaseDelayMS, c.CapDelayMS = 25, 25 })
	var events []map[string]any
	rt := testRuntime()
	rt.Emit = func(_ string, p map[string]any) { events = append(events, p) }
	busy := errors.New("Server busy, please try again later")
	calls := 0
	resp, err := m.WrapModelCall(context.Background(), modelReq(rt), failingHandler(&calls, busy, busy))
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Message.Content)
	assert.Equal(t, 3, calls)
	assert.Equal(t, []time.Duration{25 * time.Millisecond, 25 * time.Millisecond}, clock.Sleeps())
	require.Len(t, events, 2)
	assert.Equal(t, "llm_retry", events[0]["type"])
	assert.Equal(t, 3, events[0]["max_attempts"])
	assert.Equal(t, "LLM request retry 1/3: provider is busy. Retrying in 1s.", events[0]["message"])
}

func TestLLMQuotaErrorReturnsFallbackWithoutRetry(t *testing.T) {
	m := llmMW(t, newFakeClock(), nil)
	calls := 0
	resp, err := m.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, codedErr{"You exceeded your current quota", "insufficient_quota"}))
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	assert.Contains(t, resp.Message.Content, "out of quota")
	assert.Equal(t, ReasonQuota, resp.Message.AdditionalKwargs["error_reason"])
	assert.Equal(t, true, resp.Message.AdditionalKwargs[message.KwargErrorFallback])
	assert.Nil(t, resp.Response)
}

func TestLLMTransientExhaustionIsErrorFallback(t *testing.T) {
	clock := newFakeClock()
	m := llmMW(t, clock, nil)
	e503 := &model.StatusError{Provider: "openai", StatusCode: 503, Message: "upstream"}
	calls := 0
	rt := testRuntime()
	j := journal.New(journal.Options{})
	rt.Journal = j
	resp, err := m.WrapModelCall(context.Background(), modelReq(rt), failingHandler(&calls, e503, e503, e503))
	detail, failed := j.ErrorFallback()
	assert.True(t, failed, "the journal marks the run as ended by a fallback")
	assert.Contains(t, detail, "HTTP 503")
	assert.Zero(t, j.CompletionData().TotalTokens)
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Contains(t, resp.Message.Content, "temporarily unavailable")
	assert.Equal(t, ReasonTransient, resp.Message.AdditionalKwargs["error_reason"])
	assert.Equal(t, "StatusError", resp.Message.AdditionalKwargs["error_type"])
	assert.Len(t, clock.Sleeps(), 2)
}

func TestLLMUsesRetryAfterHeader(t *testing.T) {
	clock := newFakeClock()
	m := llmMW(t, clock, nil)
	var events int
	rt := testRuntime()
	rt.Emit = func(string, map[string]any) { events++ }
	calls := 0
	_, err := m.WrapModelCall(context.Background(), modelReq(rt), failingHandler(&calls, retryAfterErr{http.Header{"Retry-After": {"2"}}}))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2 * time.Second}, clock.Sleeps())
	assert.Equal(t, 1, events)

	clock2 := newFakeClock()
	m2 := llmMW(t, clock2, nil)
	calls = 0
	_, err = m2.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, retryAfterErr{http.Header{"Retry-After-Ms": {"5000"}}}))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * time.Second}, clock2.Sleeps(), "Retry-After honoured without jitter")
}

func TestLLMCancellationIsNotSwallowed(t *testing.T) {
	m := llmMW(t, newFakeClock(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	_, err := m.WrapModelCall(ctx, modelReq(testRuntime()), failingHandler(&calls, context.Canceled))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)
}

func TestCircuitBreakerTripsAndRecoversWithFakeClock(t *testing.T) {
	clock := newFakeClock()
	m := llmMW(t, clock, func(c *CircuitBreakerConfig) { c.FailureThreshold, c.RecoveryTimeoutSec, c.RetryMaxAttempts = 2, 60, 1 })
	e503 := &model.StatusError{StatusCode: 503, Message: "down"}
	calls := 0
	h := failingHandler(&calls, e503, e503, e503)
	ctx, rt := context.Background(), testRuntime()

	_, _ = m.WrapModelCall(ctx, modelReq(rt), h)
	assert.Equal(t, CircuitClosed, m.Breaker().State())
	assert.Equal(t, 1, m.Breaker().Failures())
	_, _ = m.WrapModelCall(ctx, modelReq(rt), h)
	assert.Equal(t, CircuitOpen, m.Breaker().State(), "opens at the threshold")

	resp, err := m.WrapModelCall(ctx, modelReq(rt), h)
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "open circuit fails fast without calling the model")
	assert.Equal(t, CircuitOpenMessage, resp.Message.Content)
	assert.Equal(t, "circuit_open", resp.Message.AdditionalKwargs["error_reason"])
	assert.Equal(t, "CircuitBreakerOpen", resp.Message.AdditionalKwargs["error_type"])

	clock.Advance(61 * time.Second)
	_, _ = m.WrapModelCall(ctx, modelReq(rt), h) // half-open probe fails (3rd error)
	assert.Equal(t, 3, calls)
	assert.Equal(t, CircuitOpen, m.Breaker().State(), "a failed probe reopens at once")
	_, _ = m.WrapModelCall(ctx, modelReq(rt), h)
	assert.Equal(t, 3, calls, "still open")

	clock.Advance(61 * time.Second)
	resp, err = m.WrapModelCall(ctx, modelReq(rt), h) // probe succeeds
	require.NoError(t, err)
	assert.Equal(t, "fine", resp.Message.Content)
	assert.Equal(t, CircuitClosed, m.Breaker().State())
	assert.Equal(t, 0, m.Breaker().Failures())
}

func TestCircuitHalfOpenSingleProbeAndRelease(t *testing.T) {
	clock := newFakeClock()
	b := NewCircuitBreaker(1, time.Minute, clock.Now)
	b.Failure()
	ok, _ := b.Allow()
	assert.False(t, ok)
	clock.Advance(time.Minute)
	ok, probe := b.Allow()
	assert.True(t, ok)
	assert.True(t, probe)
	assert.Equal(t, CircuitHalfOpen, b.State())
	ok, _ = b.Allow()
	assert.False(t, ok, "concurrent calls fast-fail while the probe is in flight")
	b.ReleaseProbe()
	assert.Equal(t, CircuitHalfOpen, b.State(), "a released probe keeps half-open")
	ok, probe = b.Allow()
	assert.True(t, ok && probe)

	// Non-retriable error during the probe releases it through the middleware.
	m := llmMW(t, clock, func(c *CircuitBreakerConfig) { c.FailureThreshold, c.RetryMaxAttempts = 1, 1 })
	calls := 0
	_, _ = m.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, &model.StatusError{StatusCode: 500}))
	clock.Advance(2 * time.Minute)
	calls = 0
	_, _ = m.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, errors.New("invalid api key")))
	assert.Equal(t, CircuitHalfOpen, m.Breaker().State())
	ok, _ = m.Breaker().Allow()
	assert.True(t, ok, "probe slot was released")
}

func TestCircuitDoesNotTripOnNonRetriable(t *testing.T) {
	m := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.FailureThreshold = 1 })
	for _, e := range []error{errors.New("insufficient_quota"), errors.New("401 Unauthorized")} {
		calls := 0
		_, _ = m.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, e))
	}
	assert.Equal(t, CircuitClosed, m.Breaker().State())
}

func TestClassifyError(t *testing.T) {
	for _, tc := range []struct {
		err       error
		retriable bool
		reason    string
	}{
		{model.ErrStreamChunkTimeout, true, ReasonTransient},
		{ErrEmptyGeneration, true, ReasonTransient},
		{&model.StatusError{StatusCode: 429, Message: "Too Many Requests"}, true, ReasonTransient},
		{codedErr{"throttled", "limit_burst_rate"}, true, ReasonBurstRate},
		{&model.StatusError{StatusCode: 429, Message: "request rate increased too quickly"}, true, ReasonBurstRate},
		{errors.New("model overloaded"), true, ReasonBusy},
		{errors.New("billing hard limit reached"), false, ReasonQuota},
		{errors.New("permission denied"), false, ReasonAuth},
		{errors.New("bad request: unknown field"), false, ReasonGeneric},
	} {
		r, reason := ClassifyError(tc.err)
		assert.Equal(t, tc.retriable, r, tc.err.Error())
		assert.Equal(t, tc.reason, reason, tc.err.Error())
	}
}

func TestStreamChunkTimeoutRetriesOnce(t *testing.T) {
	clock := newFakeClock()
	m := llmMW(t, clock, nil)
	calls := 0
	resp, err := m.WrapModelCall(context.Background(), modelReq(testRuntime()), failingHandler(&calls, model.ErrStreamChunkTimeout, model.ErrStreamChunkTimeout))
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
	assert.Len(t, clock.Sleeps(), 1)
	assert.Contains(t, resp.Message.Content, "streaming response was interrupted")
	assert.Equal(t, 2, m.maxAttemptsFor(model.ErrStreamChunkTimeout, ReasonTransient))
	assert.Equal(t, 3, m.maxAttemptsFor(errors.New("x"), ReasonTransient))
	one := llmMW(t, clock, func(c *CircuitBreakerConfig) { c.RetryMaxAttempts = 1 })
	assert.Equal(t, 1, one.maxAttemptsFor(model.ErrStreamChunkTimeout, ReasonTransient), "override never exceeds the user cap")
}

func TestRetryDelayDecorrelatedJitter(t *testing.T) {
	m := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.BaseDelayMS, c.CapDelayMS = 100, 10000 })
	for range 200 {
		d := m.RetryDelay(errors.New("busy"), ReasonBusy, 0)
		assert.True(t, d >= 100*time.Millisecond && d <= 300*time.Millisecond, d)
		d = m.RetryDelay(errors.New("busy"), ReasonBusy, time.Second)
		assert.True(t, d >= 100*time.Millisecond && d <= 3000*time.Millisecond, d)
	}
	capped := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.BaseDelayMS, c.CapDelayMS = 100, 500 })
	for range 100 {
		assert.LessOrEqual(t, capped.RetryDelay(errors.New("busy"), ReasonBusy, 5*time.Second), 500*time.Millisecond)
	}
	fixed := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.BaseDelayMS, c.CapDelayMS = 25, 25 })
	assert.Equal(t, 25*time.Millisecond, fixed.RetryDelay(errors.New("busy"), ReasonBusy, 0))
}

func TestBurstRateRetry(t *testing.T) {
	def := DefaultCircuitBreakerConfig()
	assert.Equal(t, []int{3, 1000, 8000, 5000}, []int{def.RetryMaxAttempts, def.BaseDelayMS, def.CapDelayMS, def.BurstBaseDelayMS})
	m := llmMW(t, newFakeClock(), nil)
	burst := codedErr{"slow down", "limit_burst_rate"}
	for range 100 {
		d := m.RetryDelay(burst, ReasonBurstRate, 0)
		assert.True(t, d >= 5*time.Second && d <= 8*time.Second, d)
	}
	m.randInt = func(lo, hi int) int { return 7000 }
	assert.Equal(t, 7*time.Second, m.RetryDelay(burst, ReasonBurstRate, 0))

	clock := newFakeClock()
	m2 := llmMW(t, clock, func(c *CircuitBreakerConfig) { c.FailureThreshold = 1 })
	var max any
	rt := testRuntime()
	rt.Emit = func(_ string, p map[string]any) { max = p["max_attempts"] }
	calls := 0
	resp, err := m2.WrapModelCall(context.Background(), modelReq(rt), failingHandler(&calls, burst, burst, burst))
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "burst budget is 2 attempts")
	assert.Equal(t, 2, max)
	assert.Contains(t, resp.Message.Content, "burst-rate")
	assert.Equal(t, CircuitClosed, m2.Breaker().State(), "burst exhaustion does not trip the breaker")
}

// freshLimiter gives the test an unset process-wide limiter (the first middleware built
// sets it) and puts the previous one back when the test ends.
func freshLimiter(t *testing.T) {
	limiterMu.Lock()
	prevFrozen, prevSem := limiterFrozen, limiterSem
	limiterFrozen, limiterSem = false, nil
	limiterMu.Unlock()
	t.Cleanup(func() {
		limiterMu.Lock()
		limiterFrozen, limiterSem = prevFrozen, prevSem
		limiterMu.Unlock()
	})
}

func TestLimiterCapsConcurrentCalls(t *testing.T) {
	freshLimiter(t)
	m := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.MaxConcurrentCalls = 2 })
	_ = llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.MaxConcurrentCalls = 8 }) // frozen: ignored
	var mu sync.Mutex
	inFlight, peak := 0, 0
	release := make(chan struct{})
	h := func(context.Context, *agent.ModelRequest) (*agent.ModelResponse, error) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return &agent.ModelResponse{Message: aiMsg("x", "ok")}, nil
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.WrapModelCall(context.Background(), modelReq(testRuntime()), h)
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, 2, peak)
}

// In a real loop the fallback ends the run with a visible answer instead of an error.
func TestLLMFallbackEndsRunInLoop(t *testing.T) {
	m := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.RetryMaxAttempts = 2 })
	p := &scriptedProvider{turns: []func(*model.Request) (*model.Response, error){
		fail(&model.StatusError{StatusCode: 502, Message: "bad gateway"}), fail(&model.StatusError{StatusCode: 502, Message: "bad gateway"}),
	}}
	res := runAgent(t, p, []agent.Middleware{NewDanglingToolCallMiddleware(), m}, "hi")
	assert.Equal(t, TransientMessage, res.Answer)
	assert.Len(t, p.requests(), 2)
}

// test_limiter_cancellation_does_not_leak_capacity.
func TestLimiterCancellationDoesNotLeakCapacity(t *testing.T) {
	freshLimiter(t)
	m := llmMW(t, newFakeClock(), func(c *CircuitBreakerConfig) { c.MaxConcurrentCalls = 1 })
	hold, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = m.WrapModelCall(context.Background(), modelReq(testRuntime()), func(context.Context, *agent.ModelRequest) (*agent.ModelResponse, error) {
			close(hold)
			<-release
			return &agent.ModelResponse{Message: aiMsg("x", "ok")}, nil
		})
	}()
	<-hold
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := m.WrapModelCall(ctx, modelReq(testRuntime()), okHandler("never"))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a waiter gives up with its context")
	close(release)
	require.Eventually(t, func() bool {
		resp, err := m.WrapModelCall(context.Background(), modelReq(testRuntime()), okHandler("free"))
		return err == nil && resp.Message.Content == "free"
	}, time.Second, 5*time.Millisecond, "the slot is free again")
}
