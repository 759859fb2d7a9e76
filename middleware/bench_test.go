package middleware

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// benchCalls is the number of lead model calls per benchmark run.
const benchCalls = 10

// instantProvider answers instantly: a distinct count tool call per turn, then a final
// answer on turn benchCalls (so the chain, not the model, is what is measured).
type instantProvider struct{}

func (instantProvider) Generate(_ context.Context, req *model.Request) (*model.Response, error) {
	turn := 0
	for _, m := range req.Messages {
		if m.IsAI() {
			turn++
		}
	}
	if req.Caller != "" { // a middleware's own call (title)
		return &model.Response{Message: message.AI("Bench title")}, nil
	}
	ai := message.AI("")
	ai.UsageMetadata = &message.UsageMetadata{InputTokens: 100, OutputTokens: 10, TotalTokens: 110}
	if turn >= benchCalls-1 {
		ai.Content = "final answer"
		ai.ResponseMetadata = map[string]any{message.MetaFinishReason: "stop"}
	} else {
		ai.ToolCalls = []message.ToolCall{{ID: fmt.Sprintf("call_%d", turn), Name: "count", Args: map[string]any{"i": float64(turn)}}}
		ai.ResponseMetadata = map[string]any{message.MetaFinishReason: "tool_calls"}
	}
	return &model.Response{Message: ai}, nil
}

type benchTool struct{}

func (benchTool) Spec() tool.Spec {
	return tool.Spec{Name: "count", Description: "count", Parameters: map[string]any{"type": "object",
		"properties": map[string]any{"i": map[string]any{"type": "number"}}}}
}
func (benchTool) Call(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{Content: "ok"}, nil
}

func benchAgent(b *testing.B, full bool) *agent.Agent {
	b.Helper()
	lead := model.Wrap(instantProvider{}, model.Info{Name: "main", Provider: "bench", Model: "bench", SupportsVision: true})
	var mws []agent.Middleware
	if full {
		cfg := DefaultConfig()
		cfg.Settings.Runtime.BaseDir = b.TempDir()
		cfg.Settings.PlanMode.Enabled = true
		cfg.TokenBudget.Enabled = true
		cfg.ToolProgress.Enabled = true
		cfg.Summarization.Enabled, cfg.Summarization.MaxTokensBeforeSummary = true, 1<<30 // counted, never fires
		cfg.Guardrails.Enabled, cfg.Guardrails.Provider = true, "tool_policy"
		var err error
		if mws, err = BuildMiddlewares(Options{Config: cfg, Model: lead}); err != nil {
			b.Fatal(err)
		}
	}
	a, err := agent.New(agent.Config{Model: lead, Tools: []tool.Tool{benchTool{}}, Middlewares: mws})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// benchRun runs one conversation on a fresh thread (loop detection keeps per-thread history
// across runs, as DeerFlow does, so reusing threads would trip it).
func benchRun(b *testing.B, a *agent.Agent, i int) time.Duration {
	j := journal.New(journal.Options{RunID: "r"})
	start := time.Now()
	res, err := a.Run(context.Background(), agent.Input{ThreadID: fmt.Sprintf("bench-%d", i), RunID: fmt.Sprintf("run-%d", i),
		UserID: "u", Journal: j, Messages: []message.Message{message.Human("benchmark")}})
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if res.Steps < 2*benchCalls-1 {
		b.Fatalf("run took %d steps", res.Steps)
	}
	return d
}

// BenchmarkChain measures one run of benchCalls model calls with the bare loop and with
// the full chain (every middleware enabled, the title call included); ns/model-call is the
// run time divided by the lead model calls.
func BenchmarkChain(b *testing.B) {
	for _, full := range []bool{false, true} {
		name := "bare"
		if full {
			name = "full"
		}
		b.Run(name, func(b *testing.B) {
			a := benchAgent(b, full)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchRun(b, a, i)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchCalls), "ns/model-call")
		})
	}
}

// cpuTime is the process's user+system CPU time: on a shared machine it is far less
// sensitive to other processes than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChainOverheadMedian interleaves bare and full runs and reports the median
// chain overhead per model call in microseconds, by wall time and by process CPU time
// (target: < 50 µs on the 2-core machine).
func BenchmarkChainOverheadMedian(b *testing.B) {
	bare, full := benchAgent(b, false), benchAgent(b, true)
	var db, df, cb, cf []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := cpuTime()
		db = append(db, benchRun(b, bare, i))
		c1 := cpuTime()
		df = append(df, benchRun(b, full, i))
		c2 := cpuTime()
		cb, cf = append(cb, c1-c0), append(cf, c2-c1)
	}
	b.StopTimer()
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	perCall := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / benchCalls }
	mb, mf := med(db), med(df)
	b.ReportMetric(perCall(mb), "bare-µs/call")
	b.ReportMetric(perCall(mf), "full-µs/call")
	b.ReportMetric(perCall(mf-mb), "overhead-µs/call")
	b.ReportMetric(perCall(med(cf)-med(cb)), "overhead-cpu-µs/call")
}
