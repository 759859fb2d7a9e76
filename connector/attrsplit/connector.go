package attrsplit

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentmeter/agentmeter/connector/attrsplit/internal/metadata"
)

// The connector's three lists, as bits of a set of them.
const (
	listAll = 1 << iota
	listWith
	listWithout
	nLists = 3
)

var listNames = [nLists]string{"all", "with", "without"}

// attrSplit splits each batch by whether a span carries key. It never changes its input:
// a list that gets every span of a batch gets the batch itself, with the lists that get
// it whole through one fanout (which clones only for pipelines that change data, and only
// as many times as the stock forward connector would); a list that gets part of a batch
// gets a copy of that part.
type attrSplit struct {
	component.StartFunc
	component.ShutdownFunc

	key string
	// whole[set] passes a batch to every pipeline of the lists in set (nil: no pipeline)
	whole [1 << nLists]consumer.Traces
	has   int // the lists that name pipelines
	tb    *metadata.TelemetryBuilder
	by    [nLists]metric.AddOption
}

func newConnector(set connector.Settings, cfg *Config, router connector.TracesRouterAndConsumer) (*attrSplit, error) {
	a := &attrSplit{key: cfg.Attribute}
	lists := [nLists][]pipeline.ID{cfg.Pipelines.All, cfg.Pipelines.With, cfg.Pipelines.Without}
	for i, l := range lists {
		if len(l) > 0 {
			a.has |= 1 << i
		}
	}
	for s := 1; s < len(a.whole); s++ {
		if s&a.has != s || s&(listWith|listWithout) == listWith|listWithout {
			continue // a list without pipelines; or with and without at once, which no batch takes whole
		}
		var ids []pipeline.ID
		for i, l := range lists {
			if s&(1<<i) != 0 {
				ids = append(ids, l...)
			}
		}
		c, err := router.Consumer(ids...)
		if err != nil {
			return nil, fmt.Errorf("attrsplit: pipelines: %w", err)
		}
		a.whole[s] = c
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("attrsplit: create metrics: %w", err)
	}
	a.tb = tb
	id := set.ID.String()
	for i, n := range listNames {
		a.by[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("connector", id), attribute.String("route", n)))
		if a.has&(1<<i) != 0 {
			tb.ConnectorAttrsplitSpans.Add(context.Background(), 0, a.by[i]) // every series from 0
		}
	}
	a.ShutdownFunc = func(context.Context) error { tb.Shutdown(); return nil }
	return a, nil
}

// Capabilities says the connector only reads its input: the pipelines after it are
// protected by the fanouts it calls, as with the forward connector.
func (*attrSplit) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ConsumeTraces passes td on to every list, the lists that get part of it first: the
// whole batch may go to pipelines that change it.
func (a *attrSplit) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	total := td.SpanCount()
	set := a.has & listAll
	n := 0 // spans that carry the attribute
	if a.has&(listWith|listWithout) != 0 && total > 0 {
		n = a.carrying(td)
		switch n {
		case total:
			set |= a.has & listWith
		case 0:
			set |= a.has & listWithout
		}
	}
	var errs []error
	if n > 0 && n < total {
		// each list's part is read off the spans again: a batch of both kinds is the
		// rarer case, and needs no record of which is which
		if a.has&listWith != 0 {
			errs = append(errs, a.whole[listWith].ConsumeTraces(ctx, a.copyWhere(td, true)))
			a.count(ctx, listWith, n)
		}
		if a.has&listWithout != 0 {
			errs = append(errs, a.whole[listWithout].ConsumeTraces(ctx, a.copyWhere(td, false)))
			a.count(ctx, listWithout, total-n)
		}
	}
	if set != 0 {
		errs = append(errs, a.whole[set].ConsumeTraces(ctx, td))
		a.count(ctx, set, total)
	}
	return errors.Join(errs...)
}

// count adds n spans passed to the lists in set.
func (a *attrSplit) count(ctx context.Context, set, n int) {
	for i := range nLists {
		if set&(1<<i) != 0 && n > 0 {
			a.tb.ConnectorAttrsplitSpans.Add(ctx, int64(n), a.by[i])
		}
	}
}

// carries reports whether sp carries the attribute.
func (a *attrSplit) carries(sp ptrace.Span) bool {
	v, ok := sp.Attributes().Get(a.key)
	return ok && v.Type() != pcommon.ValueTypeEmpty
}

// carrying counts td's spans that carry the attribute.
func (a *attrSplit) carrying(td ptrace.Traces) int {
	n := 0
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				if a.carries(spans.At(k)) {
					n++
				}
			}
		}
	}
	return n
}

// copyWhere copies the spans of td that carry the attribute (want) or do not, under
// copies of their resources and scopes.
func (a *attrSplit) copyWhere(td ptrace.Traces, want bool) ptrace.Traces {
	out := ptrace.NewTraces()
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		var ors ptrace.ResourceSpans
		haveRS := false
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j)
			spans := ss.Spans()
			var oss ptrace.ScopeSpans
			haveSS := false
			for k := range spans.Len() {
				sp := spans.At(k)
				if a.carries(sp) != want {
					continue
				}
				if !haveRS {
					ors = out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(ors.Resource())
					ors.SetSchemaUrl(rs.SchemaUrl())
					haveRS = true
				}
				if !haveSS {
					oss = ors.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(oss.Scope())
					oss.SetSchemaUrl(ss.SchemaUrl())
					haveSS = true
				}
				sp.CopyTo(oss.Spans().AppendEmpty())
			}
		}
	}
	return out
}
