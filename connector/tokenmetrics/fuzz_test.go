package tokenmetrics

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// Whatever an emitter puts in the attributes the connector reads (any type, any value),
// it never panics, and the agentmeter counter it emits never goes down.
func FuzzConsumeTraces(f *testing.F) {
	f.Add("chat gpt-4o", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(120), "subagent:r")
	f.Add("ai.generateText.doGenerate", []byte{3, 3, 3}, int64(-1), "")
	f.Add("invoke_agent x", []byte{9, 8, 7}, int64(1<<62), "middleware:")
	keys := []string{
		genai.AttrOperationName, genai.AttrUsageInput, genai.AttrUsageOutput, genai.AttrUsageCacheRead,
		genai.AttrUsageCacheCreat, genai.AttrUsageCacheWrite, genai.AttrUsageReasoning, genai.AttrCaller,
		genai.AttrAgentName, genai.AttrRequestModel, genai.AttrResponseModel, genai.AttrProviderName,
		genai.AttrMergeStatus, genai.AttrCostTotal, genai.AttrCostInput, genai.AttrOpenInferenceSpanKind,
		"server.port", "server.address",
	}
	f.Fuzz(func(t *testing.T, name string, types []byte, n int64, s string) {
		sink := new(consumertest.MetricsSink)
		c, err := newConnector(connectortest.NewNopSettings(Type), createDefaultConfig(), sink)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Shutdown(context.Background()) }()
		for round := 0; round < 2; round++ {
			td := ptrace.NewTraces()
			sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			sp.SetName(name)
			a := sp.Attributes()
			for i, typ := range types {
				k := keys[i%len(keys)]
				switch typ % 6 {
				case 0:
					a.PutInt(k, n)
				case 1:
					a.PutStr(k, s)
				case 2:
					a.PutDouble(k, float64(n)/3)
				case 3:
					a.PutBool(k, n%2 == 0)
				case 4:
					a.PutEmptyMap(k).PutStr("x", s)
				case 5:
					a.PutEmptySlice(k).AppendEmpty().SetInt(n)
				}
			}
			if err := c.ConsumeTraces(context.Background(), td); err != nil {
				t.Fatal(err)
			}
		}
		prev := map[string]int64{}
		for _, md := range sink.AllMetrics() {
			ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
			for i := 0; i < ms.Len(); i++ {
				m := ms.At(i)
				if m.Name() != genai.MetricTokens {
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					dp := dps.At(d)
					if dp.IntValue() < 0 {
						t.Fatalf("negative counter %v", dp.Attributes().AsRaw())
					}
					key := seriesName(m.Name(), nil, dp.Attributes().AsRaw())
					if dp.IntValue() < prev[key] {
						t.Fatalf("counter %s went down", key)
					}
					prev[key] = dp.IntValue()
				}
			}
		}
	})
}
