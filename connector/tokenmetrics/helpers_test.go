package tokenmetrics

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentmeter/agentmeter/genai"
)

// fakeClock is the connector's clock in tests.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time               { return f.t }
func (f *fakeClock) advance(d time.Duration)      { f.t = f.t.Add(d) }
func newFakeClock() *fakeClock                    { return &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }
func ts(t time.Time) pcommon.Timestamp            { return pcommon.NewTimestampFromTime(t) }
func (f *fakeClock) timestamp() pcommon.Timestamp { return ts(f.t) }

// harness is one connector feeding a sink, with its telemetry and logs observable.
type harness struct {
	t     *testing.T
	c     *tokenMetrics
	sink  *consumertest.MetricsSink
	clock *fakeClock
	tel   *componenttest.Telemetry
	logs  *observer.ObservedLogs
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.FlushInterval = 0 // emit after every batch, so a test reads the sink right after send
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	h := &harness{t: t, sink: new(consumertest.MetricsSink), clock: newFakeClock(), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { _ = h.tel.Shutdown(context.Background()) })
	core, logs := observer.New(zap.InfoLevel)
	h.logs = logs
	set := connectortest.NewNopSettings(Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	c, err := newConnector(set, cfg, h.sink)
	require.NoError(t, err)
	c.now = h.clock.now
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	h.c = c
	return h
}

func (h *harness) send(td ptrace.Traces) {
	h.t.Helper()
	require.NoError(h.t, h.c.ConsumeTraces(context.Background(), td))
}

// spanSeq numbers the spans the builders make.
var spanSeq atomic.Uint32

// traceBuilder makes spans under one resource.
type traceBuilder struct {
	td ptrace.Traces
	ss ptrace.ScopeSpans
	n  byte
}

func newTrace(service string) *traceBuilder {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if service != "" {
		rs.Resource().Attributes().PutStr(genai.AttrServiceName, service)
	}
	rs.Resource().Attributes().PutStr("service.instance.id", "pod-7f9c")
	rs.Resource().Attributes().PutStr("host.name", "node-1")
	return &traceBuilder{td: td, ss: rs.ScopeSpans().AppendEmpty()}
}

// span adds a span named name with attrs (values: string, int, int64, float64, bool).
func (b *traceBuilder) span(name string, attrs map[string]any) *traceBuilder {
	sp := b.ss.Spans().AppendEmpty()
	b.n++
	// ids unique across builders: a span id counted before is a repeat (repeats.go)
	n := spanSeq.Add(1)
	sp.SetTraceID(pcommon.TraceID{1, b.n})
	sp.SetSpanID(pcommon.SpanID{2, byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
	sp.SetName(name)
	if err := sp.Attributes().FromRaw(attrs); err != nil {
		panic(err) // a test wrote an attribute type pdata has no value for
	}
	return b
}

// chat adds a chat span with the usual attributes plus extra.
func (b *traceBuilder) chat(model string, u genai.Usage, extra map[string]any) *traceBuilder {
	a := map[string]any{
		genai.AttrOperationName: genai.OpChat,
		genai.AttrRequestModel:  model,
		genai.AttrProviderName:  "openai",
		genai.AttrRunID:         "run-123",
		genai.AttrResponseID:    "chatcmpl-abc",
	}
	for k, v := range extra {
		a[k] = v
	}
	b.span(genai.SpanName(genai.OpChat, model), a)
	genai.PutUsage(b.ss.Spans().At(b.ss.Spans().Len()-1).Attributes(), u)
	return b
}

func (b *traceBuilder) traces() ptrace.Traces { return b.td }

// point is the latest value of one series, as an exporter keeps it.
type point struct {
	attrs        map[string]any
	resource     map[string]any
	start, time  pcommon.Timestamp
	value        int64   // sums
	sum          float64 // histograms
	count        uint64
	bucketCounts []uint64
}

// latest replays every batch the sink got and keeps the last point per series, the way
// the prometheus exporter does. Keys are "metric{k=v,...}".
func latest(t *testing.T, sink *consumertest.MetricsSink) map[string]point {
	t.Helper()
	out := map[string]point{}
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			rm := rms.At(i)
			sms := rm.ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					add := func(attrs pcommon.Map, p point) {
						p.attrs = attrs.AsRaw()
						p.resource = rm.Resource().Attributes().AsRaw()
						key := seriesName(m.Name(), p.resource, p.attrs)
						if prev, ok := out[key]; ok {
							require.Equal(t, prev.start, p.start, "start time of %s changed", key)
							require.GreaterOrEqual(t, p.time, prev.time, "%s went back in time", key)
							require.GreaterOrEqual(t, p.value, prev.value, "counter %s went down", key)
							require.GreaterOrEqual(t, p.count, prev.count, "histogram %s count went down", key)
							require.GreaterOrEqual(t, p.sum, prev.sum, "%s sum went down", key)
						}
						out[key] = p
					}
					switch m.Type() {
					case pmetric.MetricTypeSum:
						require.True(t, m.Sum().IsMonotonic(), m.Name())
						require.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality(), m.Name())
						dps := m.Sum().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							dp := dps.At(d)
							p := point{start: dp.StartTimestamp(), time: dp.Timestamp(), value: dp.IntValue()}
							if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
								p.value, p.sum = 0, dp.DoubleValue()
							}
							add(dp.Attributes(), p)
						}
					case pmetric.MetricTypeHistogram:
						require.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality(), m.Name())
						dps := m.Histogram().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							dp := dps.At(d)
							require.Equal(t, genai.TokenUsageBuckets, dp.ExplicitBounds().AsRaw())
							add(dp.Attributes(), point{start: dp.StartTimestamp(), time: dp.Timestamp(), sum: dp.Sum(),
								count: dp.Count(), bucketCounts: dp.BucketCounts().AsRaw()})
						}
					default:
						t.Fatalf("unexpected metric type %s of %s", m.Type(), m.Name())
					}
				}
			}
		}
	}
	return out
}

func seriesName(metric string, res, attrs map[string]any) string {
	var parts []string
	for k, v := range attrs {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	return metric + "{" + strings.Join(parts, ",") + "}" + fmt.Sprint(res[genai.AttrServiceName])
}

// total adds up the values (sums) or sums (histograms) of metric's series whose
// attributes include every pair in where. No such series fails the test: a missing
// metric is not a zero.
func total(t *testing.T, pts map[string]point, metric string, where map[string]any) float64 {
	t.Helper()
	var n float64
	for _, p := range matching(t, pts, metric, where) {
		n += float64(p.value) + p.sum
	}
	return n
}

// countWhere adds up histogram observation counts; no such series fails the test.
func countWhere(t *testing.T, pts map[string]point, metric string, where map[string]any) uint64 {
	t.Helper()
	var n uint64
	for _, p := range matching(t, pts, metric, where) {
		n += p.count
	}
	return n
}

// matching returns metric's series whose attributes include every pair in where, and
// fails the test when there is none.
func matching(t *testing.T, pts map[string]point, metric string, where map[string]any) []point {
	t.Helper()
	var out []point
	for _, p := range seriesOf(pts, metric) {
		if matches(p.attrs, where) {
			out = append(out, p)
		}
	}
	require.NotEmpty(t, out, "no series of %s with %v", metric, where)
	return out
}

// by groups metric's totals by one attribute.
func by(pts map[string]point, metric, attr string) map[string]float64 {
	out := map[string]float64{}
	for key, p := range pts {
		if strings.HasPrefix(key, metric+"{") {
			out[fmt.Sprint(p.attrs[attr])] += float64(p.value) + p.sum
		}
	}
	return out
}

func matches(attrs, where map[string]any) bool {
	for k, v := range where {
		if attrs[k] != v {
			return false
		}
	}
	return true
}

// seriesOf returns metric's series (the latest point of each).
func seriesOf(pts map[string]point, metric string) []point {
	var out []point
	for key, p := range pts {
		if strings.HasPrefix(key, metric+"{") {
			out = append(out, p)
		}
	}
	return out
}
