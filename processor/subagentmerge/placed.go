package subagentmerge

import (
	"context"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// placedStorage names the storage client of the placed traces' ledgers: a store of its
// own, so a hold-mode processor's buffer and its stream engine's ledgers never mix.
const placedStorage = "placed"

// Hold mode exists for sinks that must get a run's spans whole, in order: LangSmith
// places a run by the start times and ids of all its ancestors, which only the root's
// arrival completes, since spans are exported as they end. A span that carries that
// placement from its start (genai.AttrLSDottedOrder) needs no ancestor, so with
// stream_placed its trace goes through a stream-mode engine of the same processor
// instead: it goes on at once, and its dispatchers are re-emitted as their subagents'
// usage arrives, which the LangSmith exporter sends as PATCHes.

// newPlacedEngine is the stream engine of a hold-mode processor's placed traces: cfg in
// mode stream, with its own ledgers, bounds and store.
func newPlacedEngine(set processor.Settings, cfg *Config, next consumer.Traces) *subagentMerge {
	scfg := *cfg
	scfg.Mode, scfg.StreamPlaced, scfg.ReleaseAfterRoot = ModeStream, false, 0
	e := newEngine(set, &scfg, next)
	e.storageName = placedStorage
	return e
}

// consumeRouted sends each trace of td to the engine it belongs to: the stream engine
// when it carries its placement or already has a ledger there, unless the hold engine
// holds or has released it (a trace is merged by one engine, whole). A batch of one
// kind goes on as it is; a mixed one is split by trace.
func (p *subagentMerge) consumeRouted(ctx context.Context, td ptrace.Traces) error {
	route := p.routes(td)
	switch {
	case route == nil:
		return p.consume(ctx, td, -1)
	case len(route) == 0:
		return p.placed.consumeStream(ctx, td)
	}
	placed := splitOff(td, route)
	// the stream part first: if it is refused nothing was taken, and the sender's retry
	// is new to both engines; if the hold part is then refused, the retry's stream part
	// is an exact duplicate, which its ledger drops
	if err := p.placed.consumeStream(ctx, placed); err != nil {
		return err
	}
	return p.consume(ctx, td, -1)
}

// routes returns nil when every trace of td is held, an empty map when every one is
// streamed, and otherwise the ids of the streamed ones.
func (p *subagentMerge) routes(td ptrace.Traces) map[pcommon.TraceID]bool {
	streams := map[pcommon.TraceID]bool{}
	for sp := range spaniter.All(td) {
		id := sp.TraceID()
		s, seen := streams[id]
		// a trace is streamed when any of its spans in the batch carries its placement
		if !seen || (!s && carriesPlacement(sp)) {
			streams[id] = p.streams(id, carriesPlacement(sp))
		}
	}
	held := 0
	for id, s := range streams {
		if !s {
			held++
			delete(streams, id)
		}
	}
	switch {
	case len(streams) == 0:
		return nil
	case held == 0:
		clear(streams)
	}
	return streams
}

func carriesPlacement(sp ptrace.Span) bool {
	_, ok := sp.Attributes().Get(genai.AttrLSDottedOrder)
	return ok
}

// streams reports whether trace id goes to the stream engine.
func (p *subagentMerge) streams(id pcommon.TraceID, placed bool) bool {
	if id.IsEmpty() {
		return false
	}
	s := &p.shards[shardIndex(id)]
	s.mu.Lock()
	_, buffered := s.traces[id]
	_, released := s.released[id]
	_, gone := s.gone[id]
	s.mu.Unlock()
	if buffered || released || gone {
		return false
	}
	if placed {
		return true
	}
	ps := &p.placed.shards[shardIndex(id)]
	ps.mu.Lock()
	_, ledger := ps.led.byID[id]
	ps.mu.Unlock()
	return ledger
}

// splitOff moves the spans of the traces in ids out of td into a batch of their own,
// each under a copy of its resource and scope.
func splitOff(td ptrace.Traces, ids map[pcommon.TraceID]bool) ptrace.Traces {
	out := ptrace.NewTraces()
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		var ors ptrace.ResourceSpans
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			var oss ptrace.ScopeSpans
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				if !ids[sp.TraceID()] {
					return false
				}
				if oss == (ptrace.ScopeSpans{}) {
					if ors == (ptrace.ResourceSpans{}) {
						ors = out.ResourceSpans().AppendEmpty()
						rs.Resource().CopyTo(ors.Resource())
						ors.SetSchemaUrl(rs.SchemaUrl())
					}
					oss = ors.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(oss.Scope())
					oss.SetSchemaUrl(ss.SchemaUrl())
				}
				sp.MoveTo(oss.Spans().AppendEmpty())
				return true
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return out
}
