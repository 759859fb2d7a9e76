package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// Bench runs the store benchmarks on a store from open (a fresh one for each): one run's
// lifecycle, the token aggregate over 100 runs, and a thread state of 10 turns.
func Bench(b *testing.B, open func(*testing.B) store.RunStore) {
	b.Run("RunLifecycle", func(b *testing.B) { BenchRunLifecycle(b, open(b)) })
	b.Run("Aggregate100Runs", func(b *testing.B) { BenchAggregate(b, open(b), 100) })
	b.Run("ThreadState10Turns", func(b *testing.B) { BenchThreadState(b, open(b), 10) })
}

// BenchRunLifecycle measures one run's writes as the gateway makes them: admit (the
// thread's lock and busy check), claim under a lease, one progress snapshot and the
// completion.
func BenchRunLifecycle(b *testing.B, s store.RunStore) {
	u := journal.CompletionData{TotalTokens: 1436, TotalInputTokens: 1350, TotalOutputTokens: 86, LeadAgentTokens: 1280, MiddlewareTokens: 156,
		TokenUsageByModel: map[string]journal.ModelUsage{"m": {InputTokens: 1350, OutputTokens: 86, TotalTokens: 1436, CacheReadTokens: 1024}}}
	lease := time.Now().Add(time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-run-%d", i)
		if err := s.AdmitRun(ctx, store.Run{RunID: id, ThreadID: fmt.Sprintf("bench-t%d", i%50), ModelName: "m", Input: `{"type":"human","content":"x"}`}, false, "", time.Time{}); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := s.ClaimRun(ctx, "bench", lease, store.ClaimFilter{RunID: id}); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if _, err := s.UpdateRunProgress(ctx, id, u); err != nil {
			b.Fatal(err)
		}
		if ok, err := s.UpdateRunCompletion(ctx, id, store.Completion{Status: store.StatusSuccess, Usage: u}); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchAggregate measures the token-usage aggregation of a thread with rows runs.
func BenchAggregate(b *testing.B, s store.RunStore, rows int) {
	u := journal.CompletionData{TotalTokens: 300, LeadAgentTokens: 100, SubagentTokens: 150, MiddlewareTokens: 50,
		TokenUsageByModel: map[string]journal.ModelUsage{"lead": {TotalTokens: 100}, "sub": {TotalTokens: 150}, "mw": {TotalTokens: 50}}}
	for i := range rows {
		id := fmt.Sprintf("agg-%d", i)
		if err := s.CreateRun(ctx, store.Run{RunID: id, ThreadID: "agg", Status: store.StatusRunning}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.UpdateRunCompletion(ctx, id, store.Completion{Status: store.StatusSuccess, Usage: u}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		got, err := s.AggregateTokensByThread(ctx, "agg", false)
		if err != nil || got.TotalRuns != int64(rows) {
			b.Fatal(got.TotalRuns, err)
		}
	}
}

// BenchThreadState measures what thread history adds to a run: loading the thread's
// state and saving it back with one more exchange, for a thread that already has turns
// exchanges (two messages each, ~300 bytes of content apiece).
func BenchThreadState(b *testing.B, s store.RunStore, turns int) {
	st := threadState()
	st.Messages = nil
	for i := range turns {
		h := message.Human(fmt.Sprintf("question %d: %s", i, strings.Repeat("words ", 50)))
		a := message.AI(fmt.Sprintf("answer %d: %s", i, strings.Repeat("words ", 50)))
		a.UsageMetadata = &message.UsageMetadata{InputTokens: 1200, OutputTokens: 80, TotalTokens: 1280}
		a.ResponseMetadata = map[string]any{"model_name": "m", "finish_reason": "stop"}
		st.Messages = append(st.Messages, h, a)
	}
	if _, err := s.SaveThreadState(ctx, "bench-thread", st, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		got, version, err := s.LoadThreadState(ctx, "bench-thread")
		if err != nil || len(got.Messages) != 2*turns {
			b.Fatal(len(got.Messages), err)
		}
		if _, err := s.SaveThreadState(ctx, "bench-thread", got, version); err != nil {
			b.Fatal(err)
		}
	}
}
