package genaicost

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
	"github.com/agentmeter/agentmeter/pricing"
	"github.com/agentmeter/agentmeter/processor/genaicost/internal/metadata"
)

// maxUnknownModels bounds the distinct unknown (provider, model) pairs remembered for the log-once
// rule and the metric's attributes; past it they count as "other", logged once.
const maxUnknownModels = 1000

// outcome of pricing one model-call span.
type outcome uint8

const (
	outNoUsage outcome = iota // no usage: nothing to price, not counted
	outTable
	outProvider
	outUnknownModel
	outNoModel
)

type coster struct {
	active    func() *pricing.Active // the table in use; swapped whole by a refresh
	refresher *pricing.Refresher     // nil without price_refresh
	logger    *zap.Logger
	tb        *metadata.TelemetryBuilder
	now       func() time.Time

	srcTable, srcProvider, noModel metric.AddOption
	refreshed                      map[string]metric.AddOption // outcome → its attributes

	mu      sync.Mutex
	unknown map[unknownModelKey]metric.AddOption // unknown (provider, model) → its metric attributes; logged once
	other   metric.AddOption
}

func newCoster(set processor.Settings, cfg *Config) (*coster, error) {
	build, err := cfg.tableBuilder()
	if err != nil {
		return nil, fmt.Errorf("genaicost: %w", err)
	}
	var initial *pricing.Active
	if cfg.DefaultPrices {
		initial, err = pricing.SnapshotActive(build)
	} else {
		var tab *pricing.Table
		tab, err = build(nil)
		initial = &pricing.Active{Table: tab, Source: "config"}
	}
	if err != nil {
		return nil, fmt.Errorf("genaicost: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("genaicost: create metrics: %w", err)
	}
	c := &coster{
		logger: set.Logger, tb: tb, now: time.Now,
		srcTable:    metric.WithAttributeSet(attribute.NewSet(attribute.String("source", genai.CostSourceTable))),
		srcProvider: metric.WithAttributeSet(attribute.NewSet(attribute.String("source", genai.CostSourceProvider))),
		noModel:     unpricedAttrs("no_model", "", ""),
		other:       unpricedAttrs("unknown_model", "other", "other"),
		unknown:     map[unknownModelKey]metric.AddOption{},
		refreshed:   map[string]metric.AddOption{},
	}
	for _, o := range []string{pricing.RefreshUpdated, pricing.RefreshNotModified, pricing.RefreshFailed} {
		c.refreshed[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	c.active = func() *pricing.Active { return initial }
	if r := cfg.PriceRefresh; r != nil {
		c.refresher = pricing.NewRefresher(initial, pricing.RefresherOptions{
			URL: r.URL, Interval: r.Interval, Client: pricing.RefreshClient(r.Timeout),
			Build: build, OnResult: c.refreshResult,
		})
		c.active = c.refresher.Current
	}
	if err := tb.RegisterProcessorGenaicostPriceDatasetAgeCallback(func(_ context.Context, o metric.Float64Observer) error {
		if a := c.active(); !a.Date.IsZero() {
			o.Observe(a.Age(c.now()).Seconds(), metric.WithAttributes(attribute.String("version", a.Version)))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("genaicost: create metrics: %w", err)
	}
	set.Logger.Info("genaicost: price table loaded", zap.Int("rows", initial.Table.Rows()),
		zap.String("dataset_version", initial.Version), zap.String("source", initial.Source))
	return c, nil
}

func unpricedAttrs(reason, model, provider string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason), attribute.String("model", model), attribute.String("provider", provider)))
}

// refreshResult counts a refresh and logs what changed, or in one line why the table
// in use was kept.
func (c *coster) refreshResult(r pricing.RefreshResult) {
	c.tb.ProcessorGenaicostPriceRefreshes.Add(context.Background(), 1, c.refreshed[r.Outcome])
	switch r.Outcome {
	case pricing.RefreshFailed:
		c.logger.Warn("genaicost: price refresh failed; the price table in use is kept",
			zap.Error(r.Err), zap.String("dataset_version", r.Active.Version))
	case pricing.RefreshUpdated:
		c.logger.Info("genaicost: price table refreshed", zap.String("dataset_version", r.Active.Version),
			zap.String("dataset_date", r.Active.Date.UTC().Format(time.DateOnly)), zap.Int("rows", r.Active.Table.Rows()),
			zap.String("source", r.Active.Source))
	}
}

func (c *coster) start() {
	if c.refresher != nil {
		c.refresher.Start()
	}
}

func (c *coster) shutdown(context.Context) error {
	if c.refresher != nil {
		c.refresher.Stop()
	}
	c.tb.Shutdown()
	return nil
}

// unknownModelKey is one unknown model's count within a batch.
type unknownModelKey struct{ provider, model string }

func (c *coster) processTraces(ctx context.Context, td ptrace.Traces) {
	tab := c.active().Table // one table for the whole batch, even if a refresh swaps it
	var table, provider, noModel int64
	var unknown map[unknownModelKey]int64
	for span := range spaniter.All(td) {
		attrs := span.Attributes()
		if !genai.IsModelCallSpan(span.Name(), attrs) {
			continue
		}
		out, prov, model := c.price(tab, span, attrs)
		switch out {
		case outTable:
			table++
		case outProvider:
			provider++
		case outNoModel:
			noModel++
		case outUnknownModel:
			if unknown == nil {
				unknown = map[unknownModelKey]int64{}
			}
			unknown[unknownModelKey{prov, model}]++
		}
	}
	// counters once per batch, never per span
	if table > 0 {
		c.tb.ProcessorGenaicostCallsPriced.Add(ctx, table, c.srcTable)
	}
	if provider > 0 {
		c.tb.ProcessorGenaicostCallsPriced.Add(ctx, provider, c.srcProvider)
	}
	if noModel > 0 {
		c.tb.ProcessorGenaicostCallsUnpriced.Add(ctx, noModel, c.noModel)
	}
	for k, n := range unknown {
		c.tb.ProcessorGenaicostCallsUnpriced.Add(ctx, n, c.unknownModel(k))
	}
}

// price writes the cost of one model-call span and says what it did.
func (c *coster) price(tab *pricing.Table, span ptrace.Span, attrs pcommon.Map) (out outcome, provider, model string) {
	// A cost already on the span wins: the provider's own figure (OpenRouter's
	// usage.cost, set by the emitter), or a table cost from a collector tier (or a price
	// table) before this one, so a refreshed table never rewrites a cost.
	if _, ok := attrs.Get(genai.AttrCostTotal); ok {
		src, has := attrs.Get(genai.AttrCostSource)
		if !has || src.Str() == "" {
			attrs.PutStr(genai.AttrCostSource, genai.CostSourceProvider)
			return outProvider, "", ""
		}
		if src.Str() == genai.CostSourceTable {
			return outTable, "", ""
		}
		return outProvider, "", ""
	}
	if v, ok := genai.ForeignCostFromMap(attrs); ok {
		genai.PutCost(attrs, genai.Cost{Total: v}, genai.CostSourceProvider)
		return outProvider, "", ""
	}
	u, ok := genai.UsageFromMap(attrs)
	if !ok {
		return outNoUsage, "", ""
	}
	model = genai.StringAttr(attrs, genai.AttrResponseModel) // the model that answered is the one billed
	if model == "" {
		model = genai.StringAttr(attrs, genai.AttrRequestModel)
	}
	if model == "" {
		return outNoModel, "", ""
	}
	provider = genai.StringAttr(attrs, genai.AttrProviderName)
	at := span.StartTimestamp().AsTime()
	if span.StartTimestamp() == 0 {
		at = c.now()
	}
	row, ok := tab.Lookup(provider, model, at)
	if !ok {
		return outUnknownModel, provider, model
	}
	b := pricing.Split(u, genai.CacheCreation1hFromMap(attrs))
	attrs.EnsureCapacity(attrs.Len() + 9) // the cost keys below: one growth, not several
	genai.PutCost(attrs, pricing.Compute(b, row), genai.CostSourceTable)
	attrs.PutStr(genai.AttrCostPrice, row.ID)
	if s := pricing.CacheSavings(b, row); s > 0 {
		attrs.PutDouble(genai.AttrCostCacheSavings, s)
	}
	return outTable, provider, model
}

// unknownModel returns the metric attributes of an unknown model and logs it the first
// time it is seen.
func (c *coster) unknownModel(k unknownModelKey) metric.AddOption {
	c.mu.Lock()
	defer c.mu.Unlock()
	if opt, ok := c.unknown[k]; ok {
		return opt
	}
	overflow := unknownModelKey{"\x00", "other"}
	if len(c.unknown) >= maxUnknownModels {
		if _, logged := c.unknown[overflow]; !logged {
			c.unknown[overflow] = c.other
			c.logger.Warn("genaicost: more unknown models than remembered; further ones are counted as model=\"other\" and not logged", zap.Int("limit", maxUnknownModels))
		}
		return c.other
	}
	opt := unpricedAttrs("unknown_model", k.model, k.provider)
	c.unknown[k] = opt
	c.logger.Warn("genaicost: no price for model; its calls get no cost (add a row under prices or a price file)",
		zap.String("model", k.model), zap.String("provider", k.provider))
	return opt
}
