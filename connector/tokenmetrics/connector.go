package tokenmetrics

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// Metric-set names, as in the config and the telemetry's metric_set attribute.
const (
	setAgentmeter      = "agentmeter"
	setGenAIInference  = "gen_ai_inference"
	setGenAITokenUsage = "gen_ai_token_usage"
)

// overflowResource is resources[0]: the empty resource of the overflow series, and of
// spans whose resource carries none of the configured attributes.
const overflowResource int32 = 0

// tokenMetrics is the connector. One mutex guards every table: the work per span is a
// few map lookups, and emitting under the same lock keeps each series' points in order,
// so a cumulative value never goes backwards on its way to the exporter.
type tokenMetrics struct {
	cfg    *Config
	next   consumer.Metrics
	logger *zap.Logger
	tel    *telemetry
	now    func() time.Time // a fake clock in tests

	mu sync.Mutex
	// gen numbers the flush periods; a series touched in the current one is listed once
	// in its table's touched list
	gen uint64

	stop chan struct{} // closes the flush loop (nil when every batch is emitted at once)
	done chan struct{}

	// resources are the distinct resource identities seen (the values of
	// cfg.ResourceAttributes), each kept as the resource the metrics are emitted under.
	resources  []pcommon.Resource
	resIndex   map[string]int32
	resKeyBuf  []byte
	touchedRes []int32
	resGen     []uint64 // per resource: last flush period that touched it

	agentmeter *table[agentmeterKey, agentmeterValues]
	semconv    *table[semconvKey, semconvValues]
	tokenUsage *table[tokenUsageKey, tokenUsageValues]

	outcomes [len(outcomes)]int64 // since the last flush, for the telemetry

	repeats *repeats // nil: remembered_calls 0
}

var _ connector.Traces = (*tokenMetrics)(nil)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics) (*tokenMetrics, error) {
	c := &tokenMetrics{
		cfg:      cfg,
		next:     next,
		logger:   set.Logger,
		now:      time.Now,
		resIndex: map[string]int32{},
		gen:      1, // series and resources start at 0: untouched
	}
	empty := pcommon.NewResource()
	c.resources = append(c.resources, empty)
	c.resGen = append(c.resGen, 0)
	if cfg.RememberedCalls > 0 {
		c.repeats = newRepeats(cfg.RememberedCalls)
	}
	if cfg.Metrics.Agentmeter {
		c.agentmeter = newTable[agentmeterKey, agentmeterValues](setAgentmeter, cfg.MaxSeries)
	}
	if cfg.Metrics.GenAIInference {
		c.semconv = newTable[semconvKey, semconvValues](setGenAIInference, cfg.MaxSeries)
	}
	if cfg.Metrics.GenAITokenUsage {
		c.tokenUsage = newTable[tokenUsageKey, tokenUsageValues](setGenAITokenUsage, cfg.MaxSeries)
	}
	var sets []string
	if c.agentmeter != nil {
		sets = append(sets, setAgentmeter)
	}
	if c.semconv != nil {
		sets = append(sets, setGenAIInference)
	}
	if c.tokenUsage != nil {
		sets = append(sets, setGenAITokenUsage)
	}
	tel, err := newTelemetry(set.TelemetrySettings, sets, c.seriesCounts)
	if err != nil {
		return nil, err
	}
	c.tel = tel
	return c, nil
}

// Start runs the flush loop when flush_interval is set.
func (c *tokenMetrics) Start(context.Context, component.Host) error {
	if c.cfg.FlushInterval <= 0 {
		return nil
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.flushLoop(c.cfg.FlushInterval)
	return nil
}

func (c *tokenMetrics) flushLoop(every time.Duration) {
	defer close(c.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mu.Lock()
			c.flush(context.Background())
			c.mu.Unlock()
		}
	}
}

// Shutdown stops the flush loop and emits what was counted since the last flush: the
// metrics pipeline shuts down after this connector, so its exporter still takes it.
func (c *tokenMetrics) Shutdown(ctx context.Context) error {
	if c.stop != nil {
		close(c.stop)
		<-c.done
		c.stop = nil
	}
	c.mu.Lock()
	c.flush(ctx)
	c.mu.Unlock()
	return c.tel.shutdown()
}

// Capabilities: the spans are only read, so the pipeline need not copy them for us.
func (c *tokenMetrics) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeTraces counts the batch's model calls. With flush_interval 0 it emits at once
// the current cumulative value of every series the batch changed; otherwise the flush
// loop emits the series changed since the last flush, so the output's cost is paid once
// per interval, not once per trace the merge releases. An idle series is not re-sent:
// the exporter keeps its last value.
func (c *tokenMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := pcommon.NewTimestampFromTime(c.now())

	var cl call
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := int32(-1) // resolved at the first counted span
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				o := readCall(sp, &cl)
				if o == outNotModelCall {
					continue
				}
				if o == outCounted && c.repeats != nil && c.repeats.seen(sp.TraceID(), sp.SpanID()) {
					o = outRepeat
				}
				c.outcomes[o]++
				if o != outCounted {
					continue
				}
				if res < 0 {
					res = c.resource(rs.Resource())
				}
				c.count(res, &cl, now)
			}
		}
	}
	if c.stop == nil {
		c.flush(ctx)
	}
	return nil
}

// flush emits every series touched since the last flush, under c.mu. The calls are
// counted whatever happens downstream, and an error is not handed back: the traces
// pipeline would return it to the agent's SDK, whose retry would count the same calls
// again (and send them to the vendors twice). The values are cumulative, so the next
// flush that touches a series carries what this one failed to deliver.
func (c *tokenMetrics) flush(ctx context.Context) {
	// the connector's own counters too are added once per flush, not per trace
	c.tel.record(ctx, c)
	c.resetCounts()
	if len(c.touchedRes) == 0 {
		return
	}
	md := c.build(pcommon.NewTimestampFromTime(c.now()))
	c.endFlush()
	if err := c.next.ConsumeMetrics(ctx, md); err != nil {
		c.logger.Warn("token metrics: the metrics pipeline refused a batch; the totals stay counted and go out with the next one",
			zap.Error(err))
	}
}

// count adds one call to every enabled metric set.
func (c *tokenMetrics) count(res int32, cl *call, now pcommon.Timestamp) {
	if t := c.agentmeter; t != nil {
		s := t.get(res, agentmeterKey{cl.caller, cl.agent, cl.model, cl.provider}, c.gen, now)
		s.v.add(cl.usage)
		if cl.hasCost {
			s.v.addCost(cl.cost)
			s.v.savings += cl.savings
		}
		c.touchResource(s.res)
	}
	if t := c.semconv; t != nil {
		s := t.get(res, semconvKey{cl.operation, cl.provider, cl.requestModel, cl.responseModel, cl.serverAddress, cl.serverPort}, c.gen, now)
		s.v.add(cl.usage)
		s.v.input.observe(cl.usage.Input)
		s.v.output.observe(cl.usage.Output)
		c.touchResource(s.res)
	}
	if t := c.tokenUsage; t != nil {
		s := t.get(res, tokenUsageKey{cl.operation, cl.provider, cl.requestModel, cl.responseModel}, c.gen, now)
		s.v.input.observe(cl.usage.Input)
		s.v.output.observe(cl.usage.Output)
		c.touchResource(s.res)
	}
}

func (c *tokenMetrics) touchResource(res int32) {
	if c.resGen[res] != c.gen {
		c.resGen[res] = c.gen
		c.touchedRes = append(c.touchedRes, res)
	}
}

// resource returns the index of r's identity (the configured attributes' values),
// adding it when new. Past MaxSeries identities, calls fall to the overflow resource.
func (c *tokenMetrics) resource(r pcommon.Resource) int32 {
	attrs := r.Attributes()
	buf := c.resKeyBuf[:0]
	found := false
	for _, k := range c.cfg.ResourceAttributes {
		if v, ok := attrs.Get(k); ok {
			buf = append(buf, boundLabel(v.AsString())...)
			found = true
		}
		buf = append(buf, 0)
	}
	c.resKeyBuf = buf
	if !found {
		return overflowResource
	}
	if i, ok := c.resIndex[string(buf)]; ok { // no allocation for the lookup
		return i
	}
	if len(c.resources) > c.cfg.MaxSeries {
		return overflowResource
	}
	out := pcommon.NewResource()
	for _, k := range c.cfg.ResourceAttributes {
		if v, ok := attrs.Get(k); ok {
			if s := v.AsString(); boundLabel(s) != s {
				out.Attributes().PutStr(k, boundLabel(s))
				continue
			}
			v.CopyTo(out.Attributes().PutEmpty(k))
		}
	}
	i := int32(len(c.resources))
	c.resources = append(c.resources, out)
	c.resGen = append(c.resGen, 0)
	c.resIndex[strings.Clone(string(buf))] = i
	return i
}

// endFlush starts a new flush period: every series is untouched again.
func (c *tokenMetrics) endFlush() {
	c.gen++
	c.touchedRes = c.touchedRes[:0]
	if c.agentmeter != nil {
		c.agentmeter.endFlush()
	}
	if c.semconv != nil {
		c.semconv.endFlush()
	}
	if c.tokenUsage != nil {
		c.tokenUsage.endFlush()
	}
}

// resetCounts clears what the telemetry was given.
func (c *tokenMetrics) resetCounts() {
	c.outcomes = [len(outcomes)]int64{}
	if c.agentmeter != nil {
		c.agentmeter.overflowCalls = 0
	}
	if c.semconv != nil {
		c.semconv.overflowCalls = 0
	}
	if c.tokenUsage != nil {
		c.tokenUsage.overflowCalls = 0
	}
}

// seriesCounts reports each enabled set's label sets, for the telemetry gauge.
func (c *tokenMetrics) seriesCounts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, 3)
	if c.agentmeter != nil {
		out[setAgentmeter] = int64(c.agentmeter.len())
	}
	if c.semconv != nil {
		out[setGenAIInference] = int64(c.semconv.len())
	}
	if c.tokenUsage != nil {
		out[setGenAITokenUsage] = int64(c.tokenUsage.len())
	}
	return out
}

// overflowed logs, once per metric set, that the set reached max_series.
func (c *tokenMetrics) overflowed(set string, warned *bool) {
	if *warned {
		return
	}
	*warned = true
	c.logger.Warn("token metrics: max_series reached; calls with new label sets are counted in the overflow series (otel.metric.overflow=\"true\") from now on",
		zap.String("metric_set", set), zap.Int("max_series", c.cfg.MaxSeries))
}
