package attrsplit

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/agentmeter/agentmeter/connector/attrsplit/internal/metadatatest"
)

var update = flag.Bool("update", false, "rewrite testdata/split/*.yaml from goldenInput and the connector")

const key = "langsmith.span.dotted_order"

var (
	pAll     = pipeline.NewIDWithName(pipeline.SignalTraces, "all")
	pWith    = pipeline.NewIDWithName(pipeline.SignalTraces, "with")
	pWithout = pipeline.NewIDWithName(pipeline.SignalTraces, "without")
)

// rig is a connector with a sink (or another consumer) behind each pipeline.
type rig struct {
	c     connector.Traces
	sinks map[pipeline.ID]*consumertest.TracesSink
	tel   *componenttest.Telemetry
}

func newRig(t *testing.T, p Pipelines, override map[pipeline.ID]consumer.Traces) *rig {
	t.Helper()
	r := &rig{sinks: map[pipeline.ID]*consumertest.TracesSink{}, tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, r.tel.Shutdown(context.Background())) })
	cm := map[pipeline.ID]consumer.Traces{}
	for _, ids := range [][]pipeline.ID{p.All, p.With, p.Without} {
		for _, id := range ids {
			if c, ok := override[id]; ok {
				cm[id] = c
				continue
			}
			s := new(consumertest.TracesSink)
			r.sinks[id], cm[id] = s, s
		}
	}
	cfg := &Config{Attribute: key, Pipelines: p}
	require.NoError(t, cfg.Validate())
	c, err := NewFactory().CreateTracesToTraces(context.Background(), metadatatest.NewSettings(r.tel), cfg, connector.NewTracesRouter(cm))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	r.c = c
	return r
}

func (r *rig) got(id pipeline.ID) []ptrace.Traces { return r.sinks[id].AllTraces() }

// A batch of two resources and three scopes, spans with and without the attribute, an
// empty-valued one (it counts as absent, as OTTL's nil) and an empty string (present).
func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "split")
	if *update {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, golden.WriteTraces(t, filepath.Join(dir, "input.yaml"), goldenInput()))
	}
	in, err := golden.ReadTraces(filepath.Join(dir, "input.yaml"))
	require.NoError(t, err)
	orig := ptrace.NewTraces()
	in.CopyTo(orig)

	r := newRig(t, Pipelines{All: []pipeline.ID{pAll}, With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, nil)
	require.NoError(t, r.c.ConsumeTraces(context.Background(), in))
	require.NoError(t, ptracetest.CompareTraces(orig, in), "the input is not changed")
	require.Len(t, r.got(pAll), 1)
	require.NoError(t, ptracetest.CompareTraces(orig, r.got(pAll)[0]), "all gets the batch as it came")
	for _, l := range []struct {
		id   pipeline.ID
		file string
	}{{pWith, "expected_with.yaml"}, {pWithout, "expected_without.yaml"}} {
		require.Len(t, r.got(l.id), 1, l.id.String())
		got := r.got(l.id)[0]
		file := filepath.Join(dir, l.file)
		if *update {
			require.NoError(t, golden.WriteTraces(t, file, got))
		}
		want, err := golden.ReadTraces(file)
		require.NoError(t, err)
		require.NoError(t, ptracetest.CompareTraces(want, got), l.file)
	}
}

// goldenInput is TestGolden's batch: an agent service with a placed and an unplaced
// scope, and a model-client service whose spans carry no placement.
func goldenInput() ptrace.Traces {
	td := ptrace.NewTraces()
	tid := pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	add := func(ss ptrace.ScopeSpans, name string, id byte, set func(pcommon.Map)) {
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{id})
		s.SetStartTimestamp(pcommon.Timestamp(1767225600000000000 + uint64(id)*1000000))
		s.SetEndTimestamp(s.StartTimestamp() + 5000000)
		s.Attributes().PutStr("gen_ai.operation.name", "chat")
		if set != nil {
			set(s.Attributes())
		}
	}
	rs := td.ResourceSpans().AppendEmpty()
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.37.0")
	rs.Resource().Attributes().PutStr("service.name", "lead-agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("agentmeter/runtime")
	ss.Scope().SetVersion("0.1.0")
	add(ss, "chat lead", 1, func(m pcommon.Map) { m.PutStr(key, "20260101T000000001000Z0100000000000000") })
	add(ss, "execute_tool task", 2, func(m pcommon.Map) { m.PutStr(key, "") })
	add(ss, "chat after", 3, nil)
	ss = rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("middleware")
	add(ss, "chat summarise", 4, func(m pcommon.Map) { m.PutEmpty(key) })
	add(ss, "chat title", 5, func(m pcommon.Map) { m.PutStr(key, "20260101T000000005000Z0500000000000000") })
	rs = td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "model-client")
	ss = rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.openai")
	add(ss, "chat gpt-4.1", 6, nil)
	return td
}

// Random batches, random lists: every list gets exactly its spans, each under a copy of
// its own resource and scope, in the order they came; a list with nothing for it is not
// called; the input stays as it was.
func TestSplitRandomBatches(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 27))
	for it := range 300 {
		var p Pipelines
		for p.All == nil && p.With == nil && p.Without == nil {
			if rnd.IntN(2) == 0 {
				p.All = []pipeline.ID{pAll}
			}
			if rnd.IntN(2) == 0 {
				p.With = []pipeline.ID{pWith}
			}
			if rnd.IntN(2) == 0 {
				p.Without = []pipeline.ID{pWithout}
			}
		}
		r := newRig(t, p, nil)
		td := randomBatch(rnd)
		orig := ptrace.NewTraces()
		td.CopyTo(orig)
		require.NoError(t, r.c.ConsumeTraces(context.Background(), td))
		require.NoError(t, ptracetest.CompareTraces(orig, td), "batch %d: input changed", it)

		all, with, without := describe(orig, func(ptrace.Span) bool { return true }), describe(orig, carries), describe(orig, func(s ptrace.Span) bool { return !carries(s) })
		for _, l := range []struct {
			ids  []pipeline.ID
			id   pipeline.ID
			want []string
		}{{p.All, pAll, all}, {p.With, pWith, with}, {p.Without, pWithout, without}} {
			if l.ids == nil {
				continue
			}
			got := r.got(l.id)
			if len(l.want) == 0 && l.id != pAll {
				assert.Empty(t, got, "batch %d: %s is not called with nothing", it, l.id)
				continue
			}
			require.Len(t, got, 1, "batch %d: %s", it, l.id)
			assert.Equal(t, l.want, describe(got[0], func(ptrace.Span) bool { return true }), "batch %d: %s", it, l.id)
		}
	}
}

func carries(s ptrace.Span) bool {
	v, ok := s.Attributes().Get(key)
	return ok && v.Type() != pcommon.ValueTypeEmpty
}

// describe lists the spans keep selects as resource/scope/span names, in order.
func describe(td ptrace.Traces, keep func(ptrace.Span) bool) []string {
	var out []string
	for _, rs := range td.ResourceSpans().All() {
		res, _ := rs.Resource().Attributes().Get("service.name")
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if keep(s) {
					out = append(out, res.Str()+"/"+ss.Scope().Name()+"/"+s.Name())
				}
			}
		}
	}
	return out
}

func randomBatch(rnd *rand.Rand) ptrace.Traces {
	td := ptrace.NewTraces()
	n := 0
	for ri := range rnd.IntN(3) + 1 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", string(rune('a'+ri)))
		for si := range rnd.IntN(3) + 1 {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(string(rune('p' + si)))
			for range rnd.IntN(5) {
				s := ss.Spans().AppendEmpty()
				n++
				s.SetName(string(rune('A'+n%26)) + string(rune('0'+n/26)))
				s.SetSpanID(pcommon.SpanID{byte(n), byte(n >> 8), 1})
				s.Attributes().PutInt("n", int64(n))
				switch rnd.IntN(5) {
				case 0:
					s.Attributes().PutStr(key, "20260101T000000000000Z"+s.SpanID().String())
				case 1:
					s.Attributes().PutStr(key, "")
				case 2:
					s.Attributes().PutEmpty(key)
				case 3:
					s.Attributes().PutInt(key, 1)
				}
			}
		}
	}
	return td
}

// A list that gets every span of a batch gets the batch itself, not a copy; with two
// read-only pipelines the fanout marks it read-only, as it does for the forward
// connector.
func TestWholeBatchIsPassedNotCopied(t *testing.T) {
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.Attributes().PutStr(key, "x")

	r := newRig(t, Pipelines{With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, nil)
	require.NoError(t, r.c.ConsumeTraces(context.Background(), td))
	require.Len(t, r.got(pWith), 1)
	assert.True(t, r.got(pWith)[0] == td, "the batch itself")
	assert.Empty(t, r.got(pWithout))

	r = newRig(t, Pipelines{All: []pipeline.ID{pAll}, With: []pipeline.ID{pWith}}, nil)
	require.NoError(t, r.c.ConsumeTraces(context.Background(), td))
	assert.True(t, r.got(pAll)[0] == td && r.got(pWith)[0] == td, "one batch for both")
	assert.True(t, td.IsReadOnly())
}

// mutator is a pipeline that changes what it gets (as a processor may), after keeping it.
type mutator struct{ consumertest.TracesSink }

func (*mutator) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: true} }

func (m *mutator) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	kept := ptrace.NewTraces()
	td.CopyTo(kept)
	_ = m.TracesSink.ConsumeTraces(ctx, kept)
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			ss.Spans().RemoveIf(func(ptrace.Span) bool { return true })
		}
	}
	return nil
}

// Pipelines that change data never see each other's changes, nor change the input of a
// list called after them.
func TestMutatingPipelinesGetTheirOwn(t *testing.T) {
	for _, name := range []string{"every span without", "mixed"} {
		t.Run(name, func(t *testing.T) {
			mAll, mWithout := &mutator{}, &mutator{}
			r := newRig(t, Pipelines{All: []pipeline.ID{pAll}, With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}},
				map[pipeline.ID]consumer.Traces{pAll: mAll, pWithout: mWithout})
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			spans.AppendEmpty().SetName("a")
			spans.AppendEmpty().SetName("b")
			if name == "mixed" {
				spans.AppendEmpty().Attributes().PutStr(key, "x")
			}
			require.NoError(t, r.c.ConsumeTraces(context.Background(), td))
			assert.Equal(t, td.SpanCount(), 0, "the last pipeline that changes data got the batch itself")
			require.Len(t, mWithout.AllTraces(), 1)
			assert.Equal(t, 2, mWithout.AllTraces()[0].SpanCount())
			require.Len(t, mAll.AllTraces(), 1)
			assert.Equal(t, 2+len(r.got(pWith)), mAll.AllTraces()[0].SpanCount(), "all saw the batch whole")
		})
	}
}

// A failing list fails the call (its error kept, so a retryable one stays retryable),
// and the other lists still get their spans.
func TestListErrorsAreJoined(t *testing.T) {
	boom := errors.New("queue full")
	r := newRig(t, Pipelines{All: []pipeline.ID{pAll}, Without: []pipeline.ID{pWithout}},
		map[pipeline.ID]consumer.Traces{pWithout: consumertest.NewErr(boom)})
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	err := r.c.ConsumeTraces(context.Background(), td)
	require.ErrorIs(t, err, boom)
	assert.Len(t, r.got(pAll), 1)
}

func TestTelemetryCountsSpansByRoute(t *testing.T) {
	r := newRig(t, Pipelines{All: []pipeline.ID{pAll}, With: []pipeline.ID{pWith}, Without: []pipeline.ID{pWithout}}, nil)
	for _, placed := range [][]bool{{true, false, false}, {false}, {true, true}} {
		td := ptrace.NewTraces()
		spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for _, p := range placed {
			s := spans.AppendEmpty()
			if p {
				s.Attributes().PutStr(key, "x")
			}
		}
		require.NoError(t, r.c.ConsumeTraces(context.Background(), td))
	}
	dp := func(route string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(
			attribute.String("connector", "attrsplit"), attribute.String("route", route))}
	}
	metadatatest.AssertEqualConnectorAttrsplitSpans(t, r.tel,
		[]metricdata.DataPoint[int64]{dp("all", 6), dp("with", 3), dp("without", 3)},
		metricdatatest.IgnoreTimestamp())
}
