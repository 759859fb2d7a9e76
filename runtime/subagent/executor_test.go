package subagent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/model/scripted"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script: turn 1 calls the "probe" tool with usage 100/20; turn 2 is given per test.
func scriptedModel(t *testing.T, turn2 string) model.ChatModel {
	t.Helper()
	s, err := scripted.Parse([]byte(`
conversations:
  - name: sub
    caller: "subagent:*"
    turns:
      - tool_calls: [{id: call_probe, name: probe, args: {}}]
        usage: {input: 100, output: 20, cache_read: 40}
        model: sub-model
` + turn2))
	require.NoError(t, err)
	return model.Wrap(scripted.New(s, "sub-model"), model.Info{Name: "main", Provider: "scripted", Model: "sub-model"})
}

// scriptedModelNamed is scriptedModel reporting another model id.
func scriptedModelNamed(t *testing.T, name string) model.ChatModel {
	s, err := scripted.Parse([]byte("conversations:\n  - {name: x, caller: \"subagent:*\", turns: [{content: ok}]}\n"))
	require.NoError(t, err)
	return model.Wrap(scripted.New(s, name), model.Info{Name: name, Provider: "scripted", Model: name})
}

const finalTurn = `
      - content: "all done"
        usage: {input: 150, output: 30}
        model: sub-model
`

// probe is a tool that can block, ignoring or honouring ctx.
type probe struct {
	block        time.Duration
	ignoreCancel bool
	inFly, peak  *atomic.Int64
}

func (probe) Spec() tool.Spec {
	return tool.Spec{Name: "probe", Parameters: map[string]any{"type": "object"}}
}
func (p probe) Call(ctx context.Context, _ tool.Call) (tool.Result, error) {
	if p.inFly != nil {
		n := p.inFly.Add(1)
		defer p.inFly.Add(-1)
		for {
			old := p.peak.Load()
			if n <= old || p.peak.CompareAndSwap(old, n) {
				break
			}
		}
	}
	if p.block > 0 {
		if p.ignoreCancel {
			time.Sleep(p.block)
		} else {
			select {
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			case <-time.After(p.block):
			}
		}
	}
	return tool.Result{Content: "probed"}, nil
}

// recorder counts reports to the parent journal.
type recorder struct {
	mu      sync.Mutex
	reports [][]journal.UsageRecord
}

func (r *recorder) RecordExternalLLMUsageRecords(recs []journal.UsageRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, recs)
}

func (r *recorder) get() [][]journal.UsageRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]journal.UsageRecord(nil), r.reports...)
}

func newTask(t *testing.T, m model.ChatModel, p probe, o Options) (*TaskTool, *recorder, *tool.Env, *[]string) {
	t.Helper()
	o.Model = m
	o.Tools = []tool.Tool{p}
	o.Types = []Type{{Name: "worker", Description: "test worker"}}
	e, err := NewExecutor(o)
	require.NoError(t, err)
	rec := &recorder{}
	var mu sync.Mutex
	events := &[]string{}
	env := &tool.Env{ThreadID: "t", RunID: "r", Usage: rec, Emit: func(ev string, _ map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		*events = append(*events, ev)
	}}
	return &TaskTool{Executor: e}, rec, env, events
}

func dispatch(ctx context.Context, tt *TaskTool, env *tool.Env) (tool.Result, error) {
	return tt.Call(ctx, tool.Call{ID: "call_task_1", Name: "task", Env: env,
		Args: map[string]any{"description": "probe it", "prompt": "please probe", "subagent_type": "worker"}})
}

func TestCompletedReportsUsageOnceAndStampsMessage(t *testing.T) {
	tt, rec, env, events := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{})
	res, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	assert.Equal(t, "Task Succeeded. Result: all done", res.Content)
	assert.Equal(t, message.ToolStatus(""), res.Status)
	assert.Equal(t, StatusCompleted, res.Attributes["agentmeter.subagent.status"])
	assert.Equal(t, StatusCompleted, res.AdditionalKwargs["subagent_status"])
	assert.Equal(t, "all done", res.AdditionalKwargs["subagent_result_brief"])
	assert.Len(t, res.AdditionalKwargs["subagent_result_sha256"], 64)
	assert.Equal(t, "sub-model", res.AdditionalKwargs["subagent_model_name"])
	assert.Equal(t, map[string]any{"input_tokens": int64(250), "output_tokens": int64(50), "total_tokens": int64(300)},
		res.AdditionalKwargs["subagent_token_usage"])
	reports := rec.get()
	require.Len(t, reports, 1, "usage reported exactly once")
	require.Len(t, reports[0], 2)
	assert.Equal(t, "subagent:worker", reports[0][0].Caller)
	assert.Equal(t, "sub-model", reports[0][0].ModelName)
	assert.Equal(t, int64(40), reports[0][0].CacheReadTokens)
	assert.NotEqual(t, reports[0][0].SourceRunID, reports[0][1].SourceRunID, "one record per model call")
	assert.Equal(t, []string{"task_started", "task_running", "task_running", "task_completed"}, *events)
}

func TestTimeoutReportsUsageOnce(t *testing.T) {
	slow := `
      - content: "late"
        delay: 10s
        usage: {input: 1, output: 1}
`
	tt, rec, env, events := newTask(t, scriptedModel(t, slow), probe{}, Options{Timeout: 100 * time.Millisecond})
	start := time.Now()
	res, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.Equal(t, StatusTimedOut, res.AdditionalKwargs["subagent_status"])
	assert.Equal(t, message.ToolError, res.Status)
	assert.True(t, strings.HasPrefix(res.Content, "Task timed out. Error: "), res.Content)
	assert.Equal(t, map[string]any{"input_tokens": int64(100), "output_tokens": int64(20), "total_tokens": int64(120)},
		res.AdditionalKwargs["subagent_token_usage"])
	reports := rec.get()
	require.Len(t, reports, 1)
	assert.Len(t, reports[0], 1, "the first call's usage, reported once")
	assert.Equal(t, "task_timed_out", (*events)[len(*events)-1])
}

func TestParentCancelReportsUsageOnce(t *testing.T) {
	tt, rec, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{block: 10 * time.Second}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res, err := dispatch(ctx, tt, env)
	require.NoError(t, err)
	assert.Equal(t, StatusCancelled, res.AdditionalKwargs["subagent_status"])
	assert.True(t, strings.HasPrefix(res.Content, "Task cancelled by user."), res.Content)
	reports := rec.get()
	require.Len(t, reports, 1)
	assert.Len(t, reports[0], 1)
}

func TestFailureReportsUsageOnce(t *testing.T) {
	failing := `
      - error: {status: 500, message: "upstream exploded"}
`
	tt, rec, env, events := newTask(t, scriptedModel(t, failing), probe{}, Options{})
	res, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, res.AdditionalKwargs["subagent_status"])
	assert.Contains(t, res.Content, "Task failed. Error: ")
	assert.Contains(t, res.AdditionalKwargs["subagent_error"], "HTTP 500")
	reports := rec.get()
	require.Len(t, reports, 1)
	assert.Len(t, reports[0], 1)
	assert.Equal(t, "task_failed", (*events)[len(*events)-1])
}

func TestPollingTimeoutWhenSubagentIgnoresCancel(t *testing.T) {
	tt, rec, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{block: 1500 * time.Millisecond, ignoreCancel: true},
		Options{Timeout: 50 * time.Millisecond, PollGrace: 50 * time.Millisecond})
	start := time.Now()
	res, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 1200*time.Millisecond, "returned before the stuck tool finished")
	assert.Equal(t, StatusPollingTimeout, res.AdditionalKwargs["subagent_status"])
	assert.True(t, strings.HasPrefix(res.Content, "Task polling timed out after 0 minutes."), res.Content)
	require.Len(t, rec.get(), 1)
	time.Sleep(1600 * time.Millisecond) // let the stuck goroutine finish before goleak checks
	require.Len(t, rec.get(), 1, "late usage is never reported a second time")
}

func TestRecursionLimitIsTurnCapped(t *testing.T) {
	tt, rec, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{MaxTurns: 1})
	res, err := dispatch(context.Background(), tt, env)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, res.AdditionalKwargs["subagent_status"])
	assert.Equal(t, "turn_capped", res.AdditionalKwargs["subagent_stop_reason"])
	assert.True(t, strings.HasPrefix(res.Content, "Task failed (capped: turn budget)."), res.Content)
	require.Len(t, rec.get(), 1)
}

func TestConcurrencyLimit(t *testing.T) {
	var inFly, peak atomic.Int64
	m := scriptedModel(t, finalTurn)
	tt, rec, env, _ := newTask(t, m, probe{block: 60 * time.Millisecond, inFly: &inFly, peak: &peak}, Options{MaxConcurrent: 2})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := dispatch(context.Background(), tt, env)
			assert.NoError(t, err)
			assert.Equal(t, StatusCompleted, res.AdditionalKwargs["subagent_status"])
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(2), peak.Load())
	assert.Len(t, rec.get(), 5)
}

func TestUnknownTypeAndValidation(t *testing.T) {
	tt, rec, env, _ := newTask(t, scriptedModel(t, finalTurn), probe{}, Options{})
	res, err := tt.Call(context.Background(), tool.Call{ID: "c", Env: env, Args: map[string]any{"description": "d", "prompt": "p", "subagent_type": "nope"}})
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, res.AdditionalKwargs["subagent_status"])
	assert.Contains(t, res.Content, `unknown subagent type "nope"`)
	assert.Empty(t, rec.get(), "nothing ran, nothing reported")
	_, err = tt.Call(context.Background(), tool.Call{ID: "c", Env: env, Args: map[string]any{"description": "d", "prompt": " ", "subagent_type": "worker"}})
	assert.EqualError(t, err, "invalid arguments for task: prompt: must not be empty")

	spec := tt.Spec()
	assert.Equal(t, []any{"worker"}, spec.Parameters["properties"].(map[string]any)["subagent_type"].(map[string]any)["enum"])
	assert.NoError(t, tool.ValidateArgs(spec, map[string]any{"description": "d", "prompt": "p", "subagent_type": "worker"}))
	assert.Error(t, tool.ValidateArgs(spec, map[string]any{"description": "d", "prompt": "p", "subagent_type": "other"}))

	_, err = NewExecutor(Options{})
	assert.EqualError(t, err, "subagent executor: model is required")
	_, err = NewExecutor(Options{Model: scriptedModel(t, finalTurn), Types: []Type{{Name: "x", Tools: []string{"missing"}}}})
	assert.EqualError(t, err, `subagent executor: type "x" uses unknown tool "missing"`)
}

func TestTerminalMessageContract(t *testing.T) {
	c, kw := TerminalMessage(Outcome{Status: StatusCompleted, Result: "r", StopReason: "token_capped"})
	assert.Equal(t, "Task Succeeded (capped: token budget). Result: r", c)
	assert.Equal(t, "token_capped", kw["subagent_stop_reason"])
	assert.NotContains(t, kw, "subagent_token_usage", "no usage key without records")
	c, _ = TerminalMessage(Outcome{Status: StatusCancelled})
	assert.Equal(t, "Task cancelled by user.", c)
	c, _ = TerminalMessage(Outcome{Status: StatusTimedOut, Error: "slow"})
	assert.Equal(t, "Task timed out. Error: slow", c)
	c, kw = TerminalMessage(Outcome{Status: StatusFailed, Error: "x", StopReason: "loop_capped"})
	assert.Equal(t, "Task failed (capped: repeated tool-call loop). Error: x", c)
	assert.Equal(t, "x", kw["subagent_error"])
	c, _ = TerminalMessage(Outcome{Status: StatusFailed})
	assert.Equal(t, "Task failed.", c)
	c, kw = TerminalMessage(Outcome{Status: StatusCompleted, Result: "  "})
	assert.NotContains(t, kw, "subagent_result_brief", "blank result has no brief")
	assert.Equal(t, "Task Succeeded. Result:   ", c)

	long := strings.Repeat("a", 1500) + strings.Repeat("z", 1500)
	b := Brief(long, MaxBrief)
	assert.Len(t, []rune(b), MaxBrief)
	assert.True(t, strings.HasPrefix(b, strings.Repeat("a", 1330)))
	assert.Contains(t, b, "\n...\n")
	assert.True(t, strings.HasSuffix(b, strings.Repeat("z", 665)))
	assert.Equal(t, "short", Brief("short", MaxBrief))
}

// runProbe records, per lead run (the subagent's RunID), how many of its calls are in
// flight at once, and the peak over all runs.
type runProbe struct {
	mu      sync.Mutex
	inFly   map[string]int
	runPeak map[string]int
	now     int
	peak    int
}

func (*runProbe) Spec() tool.Spec {
	return tool.Spec{Name: "probe", Parameters: map[string]any{"type": "object"}}
}

func (p *runProbe) Call(_ context.Context, call tool.Call) (tool.Result, error) {
	run := call.Env.RunID
	p.mu.Lock()
	p.inFly[run]++
	p.now++
	p.runPeak[run] = max(p.runPeak[run], p.inFly[run])
	p.peak = max(p.peak, p.now)
	p.mu.Unlock()
	time.Sleep(40 * time.Millisecond)
	p.mu.Lock()
	p.inFly[run]--
	p.now--
	p.mu.Unlock()
	return tool.Result{Content: "probed"}, nil
}

// The limit is per lead run: five runs dispatching three subagents each, with
// max_concurrent 1, run their subagents side by side (peak across runs above 1) while no
// run ever has two at once.
func TestConcurrencyLimitIsPerRun(t *testing.T) {
	p := &runProbe{inFly: map[string]int{}, runPeak: map[string]int{}}
	e, err := NewExecutor(Options{Model: scriptedModel(t, finalTurn), Tools: []tool.Tool{p}, MaxConcurrent: 1,
		Types: []Type{{Name: "worker", Description: "test worker"}}})
	require.NoError(t, err)
	tt := &TaskTool{Executor: e}
	var wg sync.WaitGroup
	for r := range 5 {
		runID := fmt.Sprintf("run-%d", r)
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := tt.Call(context.Background(), tool.Call{ID: fmt.Sprintf("call_%d", i), Name: "task",
					Env:  &tool.Env{ThreadID: "t-" + runID, RunID: runID},
					Args: map[string]any{"description": "probe", "prompt": "please probe", "subagent_type": "worker"}})
				assert.NoError(t, err)
				assert.Equal(t, StatusCompleted, res.AdditionalKwargs["subagent_status"])
			}()
		}
	}
	wg.Wait()
	assert.Greater(t, p.peak, 1, "runs do not share one limit")
	for run, peak := range p.runPeak {
		assert.Equal(t, 1, peak, "run %s had %d subagents at once", run, peak)
	}
	assert.Len(t, p.runPeak, 5)
	assert.Equal(t, 0, e.activeRuns(), "slots of finished runs are dropped")
}
