//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/runtime/journal"
)

// demoScript is the part of runtime/model/scripted/demo.yaml the test checks spans against.
type demoScript struct {
	Conversations []struct {
		Name  string     `yaml:"name"`
		Turns []demoTurn `yaml:"turns"`
	} `yaml:"conversations"`
}

// demoTurn is one scripted model response.
type demoTurn struct {
	Usage *struct {
		Input     int64 `yaml:"input"`
		Output    int64 `yaml:"output"`
		CacheRead int64 `yaml:"cache_read"`
		Reasoning int64 `yaml:"reasoning"`
	} `yaml:"usage"`
	Model     string `yaml:"model"`
	ToolCalls []struct {
		ID   string `yaml:"id"`
		Name string `yaml:"name"`
	} `yaml:"tool_calls"`
}

// runJSON is what `agentmeter run --json` prints.
type runJSON struct {
	Answer     string                 `json:"answer"`
	ThreadID   string                 `json:"thread_id"`
	RunID      string                 `json:"run_id"`
	TraceID    string                 `json:"trace_id"`
	Completion journal.CompletionData `json:"completion"`
}

// The demo run of `agentmeter run` exported to the ocb-built collector: every span of
// docs/contract.md#spans with exactly its attributes, the right parents, and own usage that
// sums to the journal's total_tokens.
func TestRuntimeDemoSpansMatchContract(t *testing.T) {
	dir := t.TempDir()
	sink := StartTraceSink(t, dir)
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
models:
  - name: main
    provider: scripted
    model: scripted-demo
sandbox:
  root: %q
`, filepath.Join(dir, "threads"))), 0o600))
	var res runJSON
	stderr := RunAgentJSON(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.OTLP, "OTEL_SERVICE_NAME=agentmeter-e2e"}, &res,
		"--config", cfgPath, "--thread", "e2e-thread", "--user", "user-7", "Compare Paris and Tokyo")
	assert.Empty(t, stderr, "no export warning with a collector listening")
	assert.Contains(t, res.Answer, "Paris")
	assert.Equal(t, "e2e-thread", res.ThreadID)
	require.NotEmpty(t, res.RunID)

	const wantSpans = 23 // 1+6+6 lead (agent, chats incl. title, tools) + 2 subagents with 5 chats and 3 tools
	spans := WaitForExactSpans(t, sink.Traces, wantSpans, 30*time.Second)

	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "runtime", "model", "scripted", "demo.yaml"))
	require.NoError(t, err)
	var script demoScript
	require.NoError(t, yaml.Unmarshal(raw, &script))

	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, s := range spans {
		assert.Equal(t, res.TraceID, s.TraceID().String(), "one trace per run: %s", s.Name())
		byID[s.SpanID()] = s
	}
	var lead ptrace.Span
	for _, s := range spans {
		if s.Name() == "invoke_agent lead_agent" {
			lead = s
		}
	}
	require.NotEqual(t, pcommon.SpanID{}, lead.SpanID(), "lead invoke_agent span")
	assert.True(t, lead.ParentSpanID().IsEmpty(), "lead span is the root")

	common := []string{genai.AttrConversationID, genai.AttrRunID, genai.AttrEndUserID, genai.AttrCaller, genai.AttrOperationName, genai.AttrLSDottedOrder}
	counts := map[string]int{}
	var ownTotal int64
	for _, s := range spans {
		a := s.Attributes()
		assert.Equal(t, "e2e-thread", genai.StringAttr(a, genai.AttrConversationID), s.Name())
		assert.Equal(t, res.RunID, genai.StringAttr(a, genai.AttrRunID), s.Name())
		assert.Equal(t, "user-7", genai.StringAttr(a, genai.AttrEndUserID), s.Name())
		caller := genai.StringAttr(a, genai.AttrCaller)
		parent := byID[s.ParentSpanID()]
		// its LangSmith placement, from its start: its parent's, then its own segment
		segs, placed := dottedorder.Parse(genai.StringAttr(a, genai.AttrLSDottedOrder))
		if assert.True(t, placed, "placement of %s", s.Name()) {
			last := segs[len(segs)-1]
			assert.Equal(t, int64(s.StartTimestamp())/1000, last.Micros, s.Name())
			if s.ParentSpanID().IsEmpty() {
				assert.Equal(t, []dottedorder.Segment{{Micros: last.Micros, RunID: dottedorder.TraceUUID(s.TraceID())}}, segs)
			} else {
				assert.Equal(t, dottedorder.SpanUUID(s.SpanID()), last.RunID, s.Name())
				pd := genai.StringAttr(parent.Attributes(), genai.AttrLSDottedOrder)
				assert.Equal(t, pd+".", genai.StringAttr(a, genai.AttrLSDottedOrder)[:len(pd)+1], s.Name())
			}
		}
		op := genai.StringAttr(a, genai.AttrOperationName)
		switch op {
		case genai.OpInvokeAgent:
			assert.Equal(t, ptrace.SpanKindInternal, s.Kind())
			name := genai.StringAttr(a, genai.AttrAgentName)
			assert.Equal(t, "invoke_agent "+name, s.Name())
			assert.NotEmpty(t, genai.StringAttr(a, genai.AttrAgentID))
			if name == genai.LeadAgentName {
				assert.Equal(t, "lead_agent", caller)
				assertKeys(t, s, common, genai.AttrAgentName, genai.AttrAgentID)
				counts["lead"]++
				continue
			}
			counts["subagent"]++
			assert.Equal(t, "general-purpose", name)
			assert.Equal(t, "subagent:general-purpose", caller)
			assertKeys(t, s, common, genai.AttrAgentName, genai.AttrAgentID, genai.AttrToolCallID)
			assert.Equal(t, "execute_tool task", parent.Name(), "subagent run under the task tool span")
			assert.Equal(t, genai.StringAttr(parent.Attributes(), genai.AttrToolCallID), genai.StringAttr(a, genai.AttrToolCallID))
			assert.Equal(t, lead.SpanID(), parent.ParentSpanID())
		case genai.OpChat:
			counts["chat"]++
			assert.Equal(t, ptrace.SpanKindClient, s.Kind())
			assert.Equal(t, "chat scripted-demo", s.Name())
			assert.Equal(t, "scripted", genai.StringAttr(a, genai.AttrProviderName))
			assert.Equal(t, "scripted-demo", genai.StringAttr(a, genai.AttrRequestModel))
			conv, turn := responseTurn(t, genai.StringAttr(a, genai.AttrResponseID))
			tr := script.turn(t, conv, turn)
			wantModel := tr.Model
			if wantModel == "" {
				wantModel = "scripted-demo"
			}
			assert.Equal(t, wantModel, genai.StringAttr(a, genai.AttrResponseModel))
			keys := append([]string{genai.AttrProviderName, genai.AttrRequestModel, genai.AttrResponseModel, genai.AttrResponseID,
				genai.AttrFinishReasons, genai.AttrRequestStream, genai.AttrUsageInput, genai.AttrUsageOutput}, common...)
			require.NotNil(t, tr.Usage)
			u, ok := genai.UsageFromMap(a)
			require.True(t, ok)
			assert.Equal(t, genai.Usage{Input: tr.Usage.Input, Output: tr.Usage.Output, CacheRead: tr.Usage.CacheRead, Reasoning: tr.Usage.Reasoning}, u, s.Name())
			ownTotal += u.Total()
			if tr.Usage.CacheRead > 0 {
				keys = append(keys, genai.AttrUsageCacheRead)
			}
			if tr.Usage.Reasoning > 0 {
				keys = append(keys, genai.AttrUsageReasoning)
			}
			if len(tr.ToolCalls) > 0 {
				keys = append(keys, genai.AttrResponseToolCallIDs)
				var ids []string
				for _, c := range tr.ToolCalls {
					ids = append(ids, c.ID)
				}
				assert.Equal(t, ids, genai.StringsFromMap(a, genai.AttrResponseToolCallIDs))
			}
			switch conv {
			case "lead":
				assert.Equal(t, "lead_agent", caller)
				assert.Equal(t, lead.SpanID(), s.ParentSpanID())
				keys = append(keys, genai.AttrStepKind)
				assert.Equal(t, []string{genai.StepToolBatch, genai.StepToolBatch, genai.StepToolBatch, genai.StepToolBatch, genai.StepFinalAnswer}[turn-1],
					genai.StringAttr(a, genai.AttrStepKind), "step kind of lead turn %d", turn)
			case "title":
				assert.Equal(t, "middleware:title", caller)
				assert.Equal(t, lead.SpanID(), s.ParentSpanID(), "middleware call under the lead span")
			default:
				assert.Equal(t, "subagent:general-purpose", caller)
				assert.Equal(t, "invoke_agent general-purpose", parent.Name())
			}
			counts["chat:"+conv]++
			assertKeys(t, s, keys)
		case genai.OpExecuteTool:
			counts["tool"]++
			assert.Equal(t, ptrace.SpanKindInternal, s.Kind())
			toolName := genai.StringAttr(a, genai.AttrToolName)
			assert.Equal(t, "execute_tool "+toolName, s.Name())
			assert.Equal(t, genai.ToolTypeFunction, genai.StringAttr(a, genai.AttrToolType))
			assert.Equal(t, ptrace.StatusCodeUnset, s.Status().Code(), "%s did not fail", s.Name())
			keys := append([]string{genai.AttrToolName, genai.AttrToolCallID, genai.AttrToolType}, common...)
			if toolName == genai.TaskToolName {
				keys = append(keys, genai.AttrSubagentStatus)
				assert.Equal(t, genai.SubagentCompleted, genai.StringAttr(a, genai.AttrSubagentStatus))
			}
			assertKeys(t, s, keys)
			assert.Equal(t, parent.Name(), map[bool]string{true: "invoke_agent lead_agent", false: "invoke_agent general-purpose"}[caller == "lead_agent"])
		default:
			t.Errorf("span %s has unexpected operation %q", s.Name(), op)
		}
	}
	assert.Equal(t, map[string]int{"lead": 1, "subagent": 2, "chat": 11, "tool": 9,
		"chat:lead": 5, "chat:title": 1, "chat:paris": 2, "chat:tokyo": 3}, counts)
	assert.Equal(t, res.Completion.TotalTokens, ownTotal, "sum of own usage over chat spans == journal total_tokens")
	assert.Equal(t, res.Completion.TotalTokens, res.Completion.LeadAgentTokens+res.Completion.SubagentTokens+res.Completion.MiddlewareTokens)
	assert.Equal(t, int64(6), res.Completion.LLMCallCount, "lead and middleware calls inline; subagent calls arrive as external records")
}

// assertKeys checks the span carries exactly these attribute keys.
func assertKeys(t *testing.T, s ptrace.Span, groups ...any) {
	t.Helper()
	var want []string
	for _, g := range groups {
		switch x := g.(type) {
		case string:
			want = append(want, x)
		case []string:
			want = append(want, x...)
		}
	}
	var got []string
	s.Attributes().Range(func(k string, _ pcommon.Value) bool { got = append(got, k); return true })
	sort.Strings(want)
	sort.Strings(got)
	assert.Equal(t, want, got, "attribute keys of %s", s.Name())
}

// responseTurn splits the scripted response id "scripted-<conversation>-<turn>".
func responseTurn(t *testing.T, id string) (string, int) {
	t.Helper()
	rest := strings.TrimPrefix(id, "scripted-")
	i := strings.LastIndexByte(rest, '-')
	require.Positive(t, i, "response id %q", id)
	var n int
	_, err := fmt.Sscanf(rest[i+1:], "%d", &n)
	require.NoError(t, err)
	return rest[:i], n
}

func (s demoScript) turn(t *testing.T, conv string, n int) demoTurn {
	t.Helper()
	for _, c := range s.Conversations {
		if c.Name == conv {
			require.LessOrEqual(t, n, len(c.Turns))
			return c.Turns[n-1]
		}
	}
	t.Fatalf("conversation %q not in the demo script", conv)
	panic("unreachable")
}
