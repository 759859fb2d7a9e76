package gateway

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// metrics are the gateway's Prometheus series. Label names and values follow docs/contract.md#metrics
// where they overlap (token_type, caller buckets, model); the token counters carry a
// gateway_ prefix so a Prometheus scraping both the gateway and the collector never adds
// the same tokens twice. Never a thread, run, user or trace id as a label.
type metrics struct {
	reg          *prometheus.Registry
	runs         *prometheus.CounterVec   // finished runs by final status
	active       prometheus.Gauge         // runs pending or running in this process
	duration     *prometheus.HistogramVec // run wall time by final status
	tokens       *prometheus.CounterVec   // by model and token type (input|output|cache_read|total)
	callerTokens *prometheus.CounterVec   // by caller bucket
	requests     *prometheus.CounterVec   // HTTP responses by route and code
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmeter_gateway_runs_total", Help: "Runs finished by this gateway, by final status.",
		}, []string{"status"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentmeter_gateway_runs_active", Help: "Runs pending or running in this gateway.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentmeter_gateway_run_duration_seconds", Help: "Wall time of finished runs, by final status.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmeter_gateway_tokens_total",
			Help: "Tokens of finished runs (the journal's token_usage_by_model), by model and token_type (input, output, cache_read, total).",
		}, []string{"model", "token_type"}),
		callerTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmeter_gateway_caller_tokens_total",
			Help: "Total tokens of finished runs by caller bucket (lead_agent, subagent, middleware).",
		}, []string{"caller"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmeter_gateway_http_requests_total", Help: "HTTP responses by route pattern and status code.",
		}, []string{"route", "code"}),
	}
	m.reg.MustRegister(m.runs, m.active, m.duration, m.tokens, m.callerTokens, m.requests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Pre-create the status and caller series so rates and sums exist from the first scrape.
	for _, s := range []store.Status{store.StatusSuccess, store.StatusError, store.StatusTimeout, store.StatusInterrupted} {
		m.runs.WithLabelValues(string(s))
	}
	for _, c := range []string{genai.BucketLeadAgent, genai.BucketSubagent, genai.BucketMiddleware} {
		m.callerTokens.WithLabelValues(c)
	}
	return m
}

// runFinished records one finished run.
func (m *metrics) runFinished(status store.Status, took time.Duration, u journal.CompletionData) {
	m.runs.WithLabelValues(string(status)).Inc()
	m.duration.WithLabelValues(string(status)).Observe(took.Seconds())
	names := slices.Sorted(maps.Keys(u.TokenUsageByModel))
	for _, n := range names {
		b := u.TokenUsageByModel[n]
		m.tokens.WithLabelValues(n, "input").Add(float64(b.InputTokens))
		m.tokens.WithLabelValues(n, "output").Add(float64(b.OutputTokens))
		m.tokens.WithLabelValues(n, "total").Add(float64(b.TotalTokens))
		if b.CacheReadTokens > 0 {
			m.tokens.WithLabelValues(n, "cache_read").Add(float64(b.CacheReadTokens))
		}
	}
	m.callerTokens.WithLabelValues(genai.BucketLeadAgent).Add(float64(u.LeadAgentTokens))
	m.callerTokens.WithLabelValues(genai.BucketSubagent).Add(float64(u.SubagentTokens))
	m.callerTokens.WithLabelValues(genai.BucketMiddleware).Add(float64(u.MiddlewareTokens))
}
