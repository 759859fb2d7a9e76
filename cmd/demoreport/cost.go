package main

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/agentmeter/agentmeter/genai"
)

// costMetric is the spend counter the demo prints and checks (docs/cost.md#sinks).
const costMetric = genai.MetricCostProm

// CostTotals is own cost in USD: the whole, per caller bucket and per model.
type CostTotals struct {
	Total    float64
	ByCaller map[string]float64
	ByModel  map[string]float64
}

func newCostTotals() CostTotals {
	return CostTotals{ByCaller: map[string]float64{}, ByModel: map[string]float64{}}
}

func (t *CostTotals) add(bucket, model string, usd float64) {
	t.Total += usd
	t.ByCaller[bucket] += usd
	t.ByModel[model] += usd
}

// SumCost adds up agentmeter_cost_usd_total samples (their cost types add up to the total).
func SumCost(samples []PromSample) CostTotals {
	t := newCostTotals()
	for _, s := range samples {
		t.add(s.Labels[genai.LabelCaller], s.Labels[genai.LabelModel], s.Value)
	}
	return t
}

// addCosts sums two per-key cost maps into a new one (the operands stay as they are).
func addCosts(a, b map[string]float64) map[string]float64 {
	if len(a) == 0 && len(b) == 0 {
		return a
	}
	out := make(map[string]float64, len(a)+len(b))
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// sameUSD: float sums over the same calls agree to 1e-9 relative (docs/cost.md#rounding-and-currency).
func sameUSD(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1e-6, math.Abs(b)) }

// checkCost compares the journal's cost keys, the spans' own cost and Prometheus' spend
// counter: in total, per caller bucket and per model; and every call must be priced.
func checkCost(journal Completion, spans SpanTotals, prom PromTotals) []error {
	var errs []error
	if journal.Unpriced != 0 || spans.Unpriced != 0 {
		errs = append(errs, fmt.Errorf("unpriced calls: journal %d, spans %d (the demo models have demo prices)", journal.Unpriced, spans.Unpriced))
	}
	if !sameUSD(journal.TotalCostUSD, spans.Cost.Total) {
		errs = append(errs, fmt.Errorf("journal total_cost_usd %.9f != span own cost %.9f", journal.TotalCostUSD, spans.Cost.Total))
	}
	if !sameUSD(prom.Cost.Total, spans.Cost.Total) {
		errs = append(errs, fmt.Errorf("prometheus sum(%s) %.9f != span own cost %.9f", costMetric, prom.Cost.Total, spans.Cost.Total))
	}
	for _, bucket := range []string{genai.BucketLeadAgent, genai.BucketSubagent, genai.BucketMiddleware} {
		want := journal.CostUSDByCaller[bucket]
		if got := spans.Cost.ByCaller[bucket]; !sameUSD(got, want) {
			errs = append(errs, fmt.Errorf("caller %s cost: journal %.9f != spans %.9f", bucket, want, got))
		}
		if got := prom.Cost.ByCaller[bucket]; !sameUSD(got, want) {
			errs = append(errs, fmt.Errorf("caller %s cost: journal %.9f != prometheus %.9f", bucket, want, got))
		}
	}
	models := slices.Sorted(maps.Keys(journal.CostUSDByModel))
	for _, m := range models {
		want := journal.CostUSDByModel[m]
		if got := spans.Cost.ByModel[m]; !sameUSD(got, want) {
			errs = append(errs, fmt.Errorf("model %s cost: journal %.9f != spans %.9f", m, want, got))
		}
		if got := prom.Cost.ByModel[m]; !sameUSD(got, want) {
			errs = append(errs, fmt.Errorf("model %s cost: journal %.9f != prometheus %.9f", m, want, got))
		}
	}
	return errs
}
