package genainormalize

import (
	"encoding/binary"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// fixture writes a trace of one instrumentation scope with deterministic ids and
// timestamps, attributes given as key/value pairs (string, int, float64 or []string
// values), so golden files are stable and each case reads like the library's spans.
type fixture struct {
	td    ptrace.Traces
	spans ptrace.SpanSlice
	tid   pcommon.TraceID
	n     uint64
}

func newFixture(traceNo uint64, service, scope, version string) *fixture {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	ss.Scope().SetVersion(version)
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], 0x6e07)
	binary.BigEndian.PutUint64(tid[8:], traceNo)
	return &fixture{td: td, spans: ss.Spans(), tid: tid, n: traceNo << 16}
}

func (f *fixture) span(parent pcommon.SpanID, name string, kind ptrace.SpanKind, kv ...any) pcommon.SpanID {
	f.n++
	sp := f.spans.AppendEmpty()
	sp.SetTraceID(f.tid)
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], f.n)
	sp.SetSpanID(id)
	sp.SetParentSpanID(parent)
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + f.n*1_000_000))
	sp.SetEndTimestamp(sp.StartTimestamp() + 500_000)
	putAll(sp.Attributes(), kv...)
	return id
}

func putAll(m pcommon.Map, kv ...any) {
	if len(kv)%2 != 0 {
		panic("odd key/value list")
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case string:
			m.PutStr(k, v)
		case int:
			m.PutInt(k, int64(v))
		case float64:
			m.PutDouble(k, v)
		case bool:
			m.PutBool(k, v)
		case []string:
			s := m.PutEmptySlice(k)
			for _, e := range v {
				s.AppendEmpty().SetStr(e)
			}
		default:
			panic(fmt.Sprintf("attribute %s: unsupported %T", k, v))
		}
	}
}

func attrMap(kv ...any) pcommon.Map {
	m := pcommon.NewMap()
	putAll(m, kv...)
	return m
}

var root pcommon.SpanID

const (
	client   = ptrace.SpanKindClient
	internal = ptrace.SpanKindInternal
)
