package genainormalize

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// normalizeProcessor holds no state besides its configuration: each span is mapped on
// its own, so it can sit anywhere before the merge and scale with the collector.
type normalizeProcessor struct {
	next consumer.Traces
	n    normalizer
}

func newProcessor(cfg *Config, next consumer.Traces) *normalizeProcessor {
	return &normalizeProcessor{next: next, n: normalizer{convs: cfg.mask()}}
}

func (*normalizeProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (*normalizeProcessor) Start(context.Context, component.Host) error { return nil }

func (*normalizeProcessor) Shutdown(context.Context) error { return nil }

// ConsumeTraces maps every span in place and passes the batch on.
func (p *normalizeProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	p.n.traces(td)
	return p.next.ConsumeTraces(ctx, td)
}

func (n *normalizer) traces(td ptrace.Traces) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			exclusive := reportsExclusiveInput(ss.Scope().Name(), ss.Scope().Version())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				n.span(spans.At(k), exclusive)
			}
		}
	}
}
