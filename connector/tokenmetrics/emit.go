package tokenmetrics

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/agentmeter/agentmeter/connector/tokenmetrics/internal/metadata"
	"github.com/agentmeter/agentmeter/genai"
)

var scopeName = metadata.ScopeName

// Metric names and descriptions. The agentmeter set's names are fixed by dashboards
// (agentmeter.tokens is agentmeter_tokens_total in Prometheus); the semconv ones are the
// GenAI semantic conventions'.
const (
	descTokens     = "Tokens used by model calls (own usage only), by token type, caller bucket, agent, model and provider."
	descCost       = "Cost in USD of model calls (own cost only), by cost type, caller bucket, agent, model and provider."
	descSavings    = "What model calls' cache reads saved in USD against the input rate, by caller bucket, agent, model and provider."
	unitToken      = "{token}"
	descOpInput    = "The number of input (prompt) tokens used per inference operation."
	descOpOutput   = "The number of output (completion) tokens used per inference operation."
	descTokenUsage = "Number of input and output tokens used."
)

// usageMetrics are the semconv counters, one per usage kind, in genai.Usage.Kinds order.
var usageMetrics = [5]struct{ name, desc string }{
	{genai.MetricInferenceUsageInput, "The number of input (prompt) tokens used, including cached tokens."},
	{genai.MetricInferenceUsageOutput, "The number of output (completion) tokens used, including reasoning tokens."},
	{genai.MetricInferenceUsageCacheRead, "The number of input tokens served from a provider-managed cache."},
	{genai.MetricInferenceUsageCacheWrit, "The number of input tokens written to a provider-managed cache."},
	{genai.MetricInferenceUsageReasoning, "The number of output tokens used for reasoning (e.g. chain-of-thought, extended thinking)."},
}

// tokenTypes are agentmeter.tokens' token_type values, in genai.Usage.Kinds order.
var tokenTypes = [5]string{genai.TokenTypeInput, genai.TokenTypeOutput, genai.TokenTypeCacheRead, genai.TokenTypeCacheCreat, genai.TokenTypeReasoning}

// costTypes are agentmeter.cost.usd's cost_type values, in genai.Cost.Kinds order.
var costTypes = func() (out [6]string) {
	for i, k := range (genai.Cost{}).Kinds() {
		out[i] = k.CostType
	}
	return out
}()

// resOut is where one resource's points go in one batch's output.
type resOut struct {
	tokens, cost, savings     pmetric.NumberDataPointSlice
	usage                     [5]pmetric.NumberDataPointSlice
	opInput, opOutput, legacy pmetric.HistogramDataPointSlice
}

// build turns the series the batch touched into one cumulative Metrics.
func (c *tokenMetrics) build(now pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	md.ResourceMetrics().EnsureCapacity(len(c.touchedRes))
	outs := make(map[int32]*resOut, len(c.touchedRes))
	for _, res := range c.touchedRes {
		rm := md.ResourceMetrics().AppendEmpty()
		c.resources[res].CopyTo(rm.Resource())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(scopeName)
		ms := sm.Metrics()
		o := &resOut{}
		if c.agentmeter != nil {
			o.tokens = newSum(ms, genai.MetricTokens, descTokens, unitToken)
			o.cost = newSum(ms, genai.MetricCost, descCost, genai.MetricCostUnit)
			o.savings = newSum(ms, genai.MetricCacheSavings, descSavings, genai.MetricCostUnit)
		}
		if c.semconv != nil {
			for i, u := range usageMetrics {
				o.usage[i] = newSum(ms, u.name, u.desc, unitToken)
			}
			o.opInput = newHistogram(ms, genai.MetricInferenceOpInput, descOpInput)
			o.opOutput = newHistogram(ms, genai.MetricInferenceOpOutput, descOpOutput)
		}
		if c.tokenUsage != nil {
			o.legacy = newHistogram(ms, genai.MetricTokenUsage, descTokenUsage)
		}
		outs[res] = o
	}

	if t := c.agentmeter; t != nil {
		for _, s := range t.touched {
			o := outs[s.res]
			for i := range tokenTypes {
				if s.v.seen&(1<<i) == 0 {
					continue
				}
				dp := newPoint(o.tokens, s.start, now, s.v.tokens[i])
				a := dp.Attributes()
				a.PutStr(genai.LabelTokenType, tokenTypes[i])
				if t.isOverflow(s) {
					a.PutBool(genai.AttrMetricOverflow, true)
					continue
				}
				putAgentmeter(a, s.key)
			}
			for i, k := range costTypes {
				if s.v.costSeen&(1<<i) == 0 {
					continue
				}
				dp := o.cost.AppendEmpty()
				dp.SetStartTimestamp(s.start)
				dp.SetTimestamp(now)
				dp.SetDoubleValue(s.v.cost[i])
				a := dp.Attributes()
				a.PutStr(genai.LabelCostType, k)
				if t.isOverflow(s) {
					a.PutBool(genai.AttrMetricOverflow, true)
					continue
				}
				putAgentmeter(a, s.key)
			}
			if s.v.savings != 0 {
				dp := o.savings.AppendEmpty()
				dp.SetStartTimestamp(s.start)
				dp.SetTimestamp(now)
				dp.SetDoubleValue(s.v.savings)
				if t.isOverflow(s) {
					dp.Attributes().PutBool(genai.AttrMetricOverflow, true)
				} else {
					putAgentmeter(dp.Attributes(), s.key)
				}
			}
		}
	}
	if t := c.semconv; t != nil {
		for _, s := range t.touched {
			o := outs[s.res]
			over := t.isOverflow(s)
			for i := range usageMetrics {
				if s.v.seen&(1<<i) == 0 {
					continue
				}
				dp := newPoint(o.usage[i], s.start, now, s.v.tokens[i])
				if over {
					dp.Attributes().PutBool(genai.AttrMetricOverflow, true)
					continue
				}
				putSemconv(dp.Attributes(), s.key)
				dp.Attributes().PutStr(genai.AttrTokenModality, genai.TokenModalityUnknown)
			}
			for _, h := range []struct {
				dst pmetric.HistogramDataPointSlice
				h   *histogram
			}{{o.opInput, &s.v.input}, {o.opOutput, &s.v.output}} {
				dp := newHistogramPoint(h.dst, s.start, now, h.h)
				if over {
					dp.Attributes().PutBool(genai.AttrMetricOverflow, true)
				} else {
					putSemconv(dp.Attributes(), s.key)
				}
			}
		}
	}
	if t := c.tokenUsage; t != nil {
		for _, s := range t.touched {
			o := outs[s.res]
			for _, h := range []struct {
				typ string
				h   *histogram
			}{{genai.TokenTypeSemInput, &s.v.input}, {genai.TokenTypeSemOutput, &s.v.output}} {
				dp := newHistogramPoint(o.legacy, s.start, now, h.h)
				a := dp.Attributes()
				a.PutStr(genai.AttrTokenType, h.typ)
				if t.isOverflow(s) {
					a.PutBool(genai.AttrMetricOverflow, true)
					continue
				}
				putNonEmpty(a, genai.AttrOperationName, s.key.operation)
				putNonEmpty(a, genai.AttrProviderName, s.key.provider)
				putNonEmpty(a, genai.AttrRequestModel, s.key.requestModel)
				putNonEmpty(a, genai.AttrResponseModel, s.key.responseModel)
			}
		}
	}

	// a resource touched by one set only (the overflow resource) has empty metrics
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rms.At(i).ScopeMetrics().At(0).Metrics().RemoveIf(func(m pmetric.Metric) bool { return dataPoints(m) == 0 })
	}
	return md
}

func newSum(ms pmetric.MetricSlice, name, desc, unit string) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit(unit)
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return s.DataPoints()
}

func newHistogram(ms pmetric.MetricSlice, name, desc string) pmetric.HistogramDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetDescription(desc)
	m.SetUnit(unitToken)
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return h.DataPoints()
}

func newPoint(dps pmetric.NumberDataPointSlice, start, now pcommon.Timestamp, v int64) pmetric.NumberDataPoint {
	dp := dps.AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	dp.SetIntValue(v)
	return dp
}

func newHistogramPoint(dps pmetric.HistogramDataPointSlice, start, now pcommon.Timestamp, h *histogram) pmetric.HistogramDataPoint {
	dp := dps.AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	dp.SetCount(h.count)
	dp.SetSum(h.sum)
	dp.SetMin(h.min)
	dp.SetMax(h.max)
	dp.ExplicitBounds().FromRaw(bounds)
	dp.BucketCounts().FromRaw(h.counts[:])
	return dp
}

func putAgentmeter(a pcommon.Map, k agentmeterKey) {
	a.PutStr(genai.LabelCaller, k.caller)
	a.PutStr(genai.LabelAgent, k.agent)
	putNonEmpty(a, genai.LabelModel, k.model)
	putNonEmpty(a, genai.LabelProvider, k.provider)
}

func putSemconv(a pcommon.Map, k semconvKey) {
	putNonEmpty(a, genai.AttrOperationName, k.operation)
	putNonEmpty(a, genai.AttrProviderName, k.provider)
	putNonEmpty(a, genai.AttrRequestModel, k.requestModel)
	putNonEmpty(a, genai.AttrResponseModel, k.responseModel)
	putNonEmpty(a, attrServerAddress, k.serverAddress)
	if k.serverPort > 0 {
		a.PutInt(attrServerPort, k.serverPort)
	}
}

func putNonEmpty(a pcommon.Map, k, v string) {
	if v != "" {
		a.PutStr(k, v)
	}
}

func dataPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	}
	return 0
}
