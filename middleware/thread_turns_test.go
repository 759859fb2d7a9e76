package middleware

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// callLog records every model call of a run: its caller and request messages.
type callLog struct {
	mu    sync.Mutex
	calls []model.CallRecord
}

func (l *callLog) ObserveModelCall(_ context.Context, rec model.CallRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, rec)
}

func (l *callLog) byCaller(caller string) []model.CallRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []model.CallRecord
	for _, c := range l.calls {
		if c.Caller == caller {
			out = append(out, c)
		}
	}
	return out
}

// roundTrip passes the state through JSON, as the run store keeps it between runs.
func roundTrip(t *testing.T, st state.State) *state.State {
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var out state.State
	require.NoError(t, json.Unmarshal(b, &out))
	return &out
}

// TestThreadTurns runs four runs of one thread, each continuing the state the previous
// left (as the gateway does): the title is made once, the date reminder is injected once
// per day (and again after midnight, date only), summarisation compacts across turns and
// the summary reaches later requests, the latest user message always survives.
func TestThreadTurns(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("testdata", "thread_turns.yaml"))
	require.NoError(t, err)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
models:
  - {name: main, provider: scripted, model: scripted-demo, script: %q}
summarization: {enabled: true, max_tokens_before_summary: 90, keep_messages: 2}
settings:
  runtime: {base_dir: %q}
`, script, t.TempDir())))
	require.NoError(t, err)
	models, err := model.NewFactory(cfg.Models)
	require.NoError(t, err)
	clock := newFakeClock()
	chain, err := BuildMiddlewares(Options{Config: ConfigFrom(cfg), Model: models.Default(), Models: models, Clock: clock})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{Model: models.Default(), Models: models, Middlewares: chain})
	require.NoError(t, err)

	log := &callLog{}
	var prior *state.State
	run := func(i int, input string) state.State {
		ctx := model.WithObserver(context.Background(), log)
		res, err := a.Run(ctx, agent.Input{ThreadID: "thread-1", RunID: fmt.Sprintf("run-%d", i), UserID: "alice",
			State: prior, Messages: []message.Message{message.Human(input)}})
		require.NoError(t, err, "run %d", i)
		prior = roundTrip(t, res.State)
		return res.State
	}
	reminders := func(st state.State) (dates []string) {
		for _, m := range st.Messages {
			if isReminder(m) && m.IsSystem() {
				dates = append(dates, kwargString(m, KwargReminderDate))
			}
		}
		return dates
	}

	st1 := run(1, "Compare Paris and Tokyo")
	assert.Equal(t, "Paris and Tokyo", st1.Title)
	assert.Equal(t, []string{"2026-11-30"}, reminders(st1))

	st2 := run(2, "Which one is bigger?")
	assert.Equal(t, "Paris and Tokyo", st2.Title, "the title stays")
	assert.Len(t, log.byCaller("middleware:title"), 1, "one title call per thread")
	lead := log.byCaller("lead_agent")
	require.Len(t, lead, 2)
	// The second run's request carries the first run's exchange.
	req2 := lead[1].Request.Messages
	joined := ""
	for _, m := range req2 {
		joined += m.Content + "\n"
	}
	assert.Contains(t, joined, "Compare Paris and Tokyo")
	assert.Contains(t, joined, "Paris is the capital of France")
	assert.Contains(t, joined, "Which one is bigger?")
	// Same day: no second date reminder (DeerFlow's DynamicContextMiddleware).
	assert.Equal(t, []string{"2026-11-30"}, reminders(st2))

	assert.Empty(t, log.byCaller("middleware:summarize"), "below the trigger so far")

	// The third run's history crosses the trigger: the summary is kept in summary_text and
	// later requests carry it through DurableContext; the newest user message survives.
	st3 := run(3, "And the population?")
	require.NotEmpty(t, log.byCaller("middleware:summarize"), "summarisation ran across turns")
	assert.Equal(t, "Summary of the earlier turns.", st3.Extra[SummaryTextKey])
	clock.Advance(24 * time.Hour) // midnight passed: a date-only reminder
	st4 := run(4, "And the older one?")
	assert.Contains(t, reminders(st4), "2026-12-01")
	lead = log.byCaller("lead_agent")
	last := lead[len(lead)-1].Request.Messages
	var sawSummary, sawUser bool
	for _, m := range last {
		sawSummary = sawSummary || strings.Contains(m.Content, "<conversation_summary>\nSummary of the earlier turns.")
		sawUser = sawUser || strings.Contains(m.Content, "And the older one?")
	}
	assert.True(t, sawSummary, "the summary reaches the next run's request")
	assert.True(t, sawUser, "the current request is never compacted away")
	// A later summarisation folds the previous summary in (<existing_summary>).
	run(5, "Thanks")
	sums := log.byCaller("middleware:summarize")
	require.GreaterOrEqual(t, len(sums), 2)
	assert.Contains(t, sums[len(sums)-1].Request.Messages[0].Content, "<existing_summary>")
	assert.Len(t, log.byCaller("middleware:title"), 1)
}
