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
	"github.com/agentmeter/agentmeter/pricing"
	"github.com/agentmeter/agentmeter/processor/genaicost/internal/metadata"
)

// maxUnknownModels bounds the distinct unknown model ids remembered for the log-once
// rule and the metric's model attribute; past it they count as "other", logged once.
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
	table  *pricing.Table
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	now    func() time.Time

	srcTable, srcProvider, noModel metric.AddOption

	mu      sync.Mutex
	unknown map[string]metric.AddOption // unknown model id → its metric attributes; logged once
	other   metric.AddOption
}

func newCoster(set processor.Settings, cfg *Config) (*coster, error) {
	table, err := cfg.buildTable()
	if err != nil {
		return nil, fmt.Errorf("genaicost: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("genaicost: create metrics: %w", err)
	}
	set.Logger.Info("genaicost: price table loaded", zap.Int("rows", table.Rows()))
	return &coster{
		table: table, logger: set.Logger, tb: tb, now: time.Now,
		srcTable:    metric.WithAttributeSet(attribute.NewSet(attribute.String("source", genai.CostSourceTable))),
		srcProvider: metric.WithAttributeSet(attribute.NewSet(attribute.String("source", genai.CostSourceProvider))),
		noModel:     unpricedAttrs("no_model", ""),
		other:       unpricedAttrs("unknown_model", "other"),
		unknown:     map[string]metric.AddOption{},
	}, nil
}

func unpricedAttrs(reason, model string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason), attribute.String("model", model)))
}

func (c *coster) shutdown(context.Context) error {
	c.tb.Shutdown()
	return nil
}

// unknownModelKey is one unknown model's count within a batch.
type unknownModelKey struct{ provider, model string }

func (c *coster) processTraces(ctx context.Context, td ptrace.Traces) {
	var table, provider, noModel int64
	var unknown map[unknownModelKey]int64
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				attrs := span.Attributes()
				if !genai.IsModelCallSpan(span.Name(), attrs) {
					continue
				}
				out, prov, model := c.price(span, attrs)
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
func (c *coster) price(span ptrace.Span, attrs pcommon.Map) (out outcome, provider, model string) {
	// A cost already on the span wins: the provider's own figure (OpenRouter's
	// usage.cost, set by the emitter), or a table cost from a collector tier before this one.
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
	model = str(attrs, genai.AttrResponseModel) // the model that answered is the one billed
	if model == "" {
		model = str(attrs, genai.AttrRequestModel)
	}
	if model == "" {
		return outNoModel, "", ""
	}
	provider = str(attrs, genai.AttrProviderName)
	at := span.StartTimestamp().AsTime()
	if span.StartTimestamp() == 0 {
		at = c.now()
	}
	row, ok := c.table.Lookup(provider, model, at)
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
	if opt, ok := c.unknown[k.model]; ok {
		return opt
	}
	if len(c.unknown) >= maxUnknownModels {
		if _, logged := c.unknown["\x00other"]; !logged {
			c.unknown["\x00other"] = c.other
			c.logger.Warn("genaicost: more unknown models than remembered; further ones are counted as model=\"other\" and not logged", zap.Int("limit", maxUnknownModels))
		}
		return c.other
	}
	opt := unpricedAttrs("unknown_model", k.model)
	c.unknown[k.model] = opt
	c.logger.Warn("genaicost: no price for model; its calls get no cost (add a row under prices or a price file)",
		zap.String("model", k.model), zap.String("provider", k.provider))
	return opt
}

func str(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}
