package langsmith

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/timestamps"
)

func tracesJSON(t *testing.T, ops []Op) string {
	t.Helper()
	tr := NewTranslator(time.Minute, 100)
	p := tr.Plan(ops)
	td := p.Build()
	p.Commit(t0)
	more := tr.BuildRuns(tr.Drain())
	more.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	// parked runs drain in no fixed order
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			sss.At(j).Spans().Sort(func(a, b ptrace.Span) bool {
				x, y := a.SpanID(), b.SpanID()
				return bytes.Compare(x[:], y[:]) < 0
			})
		}
	}
	td.ResourceSpans().Sort(func(a, b ptrace.ResourceSpans) bool {
		x, _ := a.Resource().Attributes().Get("service.name")
		y, _ := b.Resource().Attributes().Get("service.name")
		return x.Str() < y.Str()
	})
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return string(b)
}

// expectRuns is what encoding/json makes of a /runs/batch body, the reference the one
// decoder is checked against: the runs of each group (a decoded map: the last of
// duplicate keys wins) with their string fields, times and objects, and which items
// must be refused. ok is false when the body must be refused as a whole.
type expectedItem struct {
	bad  bool
	m    map[string]any
	tags []string
}

func expectBatch(t *testing.T, body []byte) (items [2][]expectedItem, ok bool) {
	t.Helper()
	if !json.Valid(body) {
		return items, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var env any
	require.NoError(t, dec.Decode(&env))
	m, isObj := env.(map[string]any)
	if !isObj {
		return items, false
	}
	for g, kind := range []string{"post", "patch"} {
		v, has := m[kind]
		if !has || v == nil {
			continue
		}
		arr, isArr := v.([]any)
		if !isArr {
			return items, false
		}
		for _, e := range arr {
			run, isRun := e.(map[string]any)
			it := expectedItem{m: run, bad: !isRun}
			if isRun {
				it.bad, it.tags = badRun(run, g == 1)
			}
			items[g] = append(items[g], it)
		}
	}
	return items, true
}

// badRun says whether encoding/json's reading of a run breaks a field rule, and its
// tags.
func badRun(m map[string]any, patch bool) (bool, []string) {
	bad := false
	for _, k := range []string{"id", "trace_id", "dotted_order", "parent_run_id", "name", "run_type", "session_name"} {
		if v, has := m[k]; has && v != nil {
			if _, isStr := v.(string); !isStr {
				bad = true
			}
		}
	}
	id, _ := m["id"].(string)
	if !idOK(id) {
		bad = true
	}
	if tr, _ := m["trace_id"].(string); tr != "" && !idOK(tr) {
		bad = true
	}
	for _, k := range []string{"start_time", "end_time"} {
		if v, has := m[k]; has && v != nil {
			raw, _ := json.Marshal(v)
			if _, err := timestamps.ParseRawTime(raw); err != nil {
				bad = true
			}
		}
	}
	for _, k := range []string{"inputs", "outputs", "extra"} {
		if v, has := m[k]; has && v != nil {
			if _, isObj := v.(map[string]any); !isObj {
				bad = true
			}
		}
	}
	var tags []string
	if v, has := m["tags"]; has && v != nil {
		arr, isArr := v.([]any)
		if !isArr {
			bad = true
		}
		tags = []string{}
		for _, e := range arr {
			if s, isStr := e.(string); isStr {
				tags = append(tags, s)
			}
		}
	}
	return bad || labelTooLong(m, tags), tags
}

// labelTooLong says whether encoding/json's reading of a run has a label-bound value
// past genai.MaxLabelBytes (docs/agentusage.md#limits).
func labelTooLong(m map[string]any, tags []string) bool {
	long := func(v any) bool { s, _ := v.(string); return len(s) > genai.MaxLabelBytes }
	if long(m["name"]) || long(m["session_name"]) {
		return true
	}
	for _, t := range tags {
		if genai.CallerFromTags([]string{t}) != "" && long(t) {
			return true
		}
	}
	extra, _ := m["extra"].(map[string]any)
	md, _ := extra["metadata"].(map[string]any)
	for _, k := range labelMetadata {
		if long(md[k]) {
			return true
		}
	}
	inv, _ := extra["invocation_params"].(map[string]any)
	if long(inv["model"]) || long(inv["model_name"]) {
		return true
	}
	outputs, _ := m["outputs"].(map[string]any)
	return outputs != nil && long(genai.FindString(outputs, "model_name"))
}

func idOK(s string) bool {
	d := runDecoder{r: &Run{ID: s}}
	return d.finish(false)
}

// checkBatchDecoder: DecodeBatch accepts exactly the bodies encoding/json reads as a
// batch, refuses exactly the items that break a field rule (each error naming
// post[i]/patch[i] and the field), and every run it returns carries what
// encoding/json reads from it. It reports whether the body was accepted.
func checkBatchDecoder(t *testing.T, body []byte) bool {
	t.Helper()
	want, ok := expectBatch(t, body)
	ops, errs, err := DecodeBatch(body)
	if !ok {
		require.ErrorIs(t, err, ErrBody, "%s", body)
		return false
	}
	require.NoError(t, err, "%s", body)
	var wantOps []expectedItem
	var wantBad []string
	for g, kind := range []string{"post", "patch"} {
		for i, it := range want[g] {
			if it.bad {
				wantBad = append(wantBad, kind+"["+itoa(i)+"]")
			} else {
				wantOps = append(wantOps, it)
			}
		}
	}
	var gotBad []string
	for _, e := range errs {
		gotBad = append(gotBad, e.Field)
		require.True(t, strings.HasPrefix(e.Message, e.Field+"."+"") || strings.HasPrefix(e.Message, e.Field+":"), "the message names the item: %q", e.Message)
	}
	require.Equal(t, wantBad, gotBad, "%s", body)
	require.Len(t, ops, len(wantOps))
	for i, op := range ops {
		m := wantOps[i].m
		r := op.Run
		str := func(k string) string { s, _ := m[k].(string); return s }
		require.Equal(t, str("id"), r.ID)
		require.Equal(t, str("trace_id"), r.TraceID)
		require.Equal(t, str("dotted_order"), r.DottedOrder)
		require.Equal(t, str("parent_run_id"), r.ParentRunID)
		require.Equal(t, str("name"), r.Name)
		require.Equal(t, str("run_type"), r.RunType)
		require.Equal(t, str("session_name"), r.SessionName)
		for k, got := range map[string]time.Time{"start_time": r.Start, "end_time": r.End} {
			var want time.Time
			if v := m[k]; v != nil {
				raw, _ := json.Marshal(v)
				want, _ = timestamps.ParseRawTime(raw)
			}
			require.True(t, want.Equal(got), "%s: %v != %v", k, want, got)
		}
		for k, raw := range map[string][]byte{"inputs": r.inputs, "outputs": r.outputs, "extra": r.extra} {
			want, _ := m[k].(map[string]any)
			var got map[string]any
			if raw != nil {
				got = decodeMap(raw)
			}
			require.True(t, reflect.DeepEqual(want, got), "%s: %v != %v", k, want, got)
		}
		switch e := m["error"].(type) {
		case nil:
			require.Empty(t, r.Error)
		case string:
			require.Equal(t, e, r.Error)
		default:
			var v any
			require.NoError(t, json.Unmarshal([]byte(r.Error), &v), "a non-string error is kept as its JSON text")
		}
		require.Equal(t, wantOps[i].tags, r.Tags)
	}
	// and the runs translate without a panic, with or without Prepare
	tracesJSON(t, ops)
	return true
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

const (
	scanLLM  = "01a22a31-cdeb-7000-8000-037a8c6bd3a1"
	scanTool = "01a22a31-cdeb-7000-8000-037a8c6bd3a2"
	scanRoot = "01a22a31-cdeb-7000-8000-037a8c6bd3a0"
)

var scanBodies = []string{
	// LangChain LLMResult: usage and tool calls deep inside generations
	`{"post":[{"id":"` + scanLLM + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanRoot + `","run_type":"llm","name":"ChatOpenAI","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z",
	  "outputs":{"generations":[[{"text":"","message":{"lc":1,"kwargs":{"content":"x\n\"q\"","tool_calls":[{"id":"call_1","name":"task"},{"id":"call_1"},{"id":"call_2"}],
	    "response_metadata":{"model_name":"gpt-4o-2024","token_usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}},
	    "usage_metadata":{"input_tokens":10,"output_tokens":3,"input_token_details":{"cache_read":4,"ephemeral_5m_input_tokens":2},"output_token_details":{"reasoning":1}}}}}]],
	  "llm_output":{"token_usage":{"prompt_tokens":99}}},
	  "extra":{"metadata":{"ls_provider":"openai","thread_id":"th","user_id":"u"},"invocation_params":{"model":"gpt-4o"}},"tags":["lead_agent"]}]}`,
	// provider usage only (Anthropic), duplicate keys, escapes, unicode
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":1767225601000,"start_time":1767225600000,
	  "outputs":{"b":{"usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":null,"cache_creation_input_tokens":7}},"a":{"content":[{"type":"tool_use","id":"toolu_1"},{"type":"function_call","call_id":"fc_1","id":"x"}]},"model_name":"","m\u006fdel_name":"claude-é"},
	  "extra":{"metadata":{"thread_id":"a","thread_id":"b","ls_model_name":"\u00e9m"}},"error":"boom \"x\"","tags":[]}],"patch":null}`,
	// tool run: tool_call_id in extra / inputs / outputs; subagent chain under it
	`{"post":[{"id":"` + scanTool + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanRoot + `","run_type":"tool","name":"task","end_time":"2026-01-01T00:00:02Z",
	  "inputs":{"tool_call":{"id":"call_in"}},"outputs":{"output":{"tool_call_id":"call_out","subagent_status":"completed"}}},
	  {"id":"` + scanLLM + `","trace_id":"` + scanRoot + `","parent_run_id":"` + scanTool + `","run_type":"chain","name":"general-purpose","end_time":"2026-01-01T00:00:03Z","extra":{"metadata":{"lc_agent_name":"gp"}}}],
	  "patch":[{"id":"` + scanRoot + `","end_time":"2026-01-01T00:00:04Z","outputs":{},"extra":{"runtime":{}}}]}`,
	// usage in metadata; usage_metadata present but not an object; numbers as strings and floats
	`{"post":[{"id":"` + scanLLM + `","run_type":"chat_model","end_time":"2026-01-01T00:00:01Z","outputs":{"usage_metadata":3,"x":[{"usage_metadata":{"input_tokens":"12","output_tokens":1.5e1}}]},
	  "extra":{"metadata":{"usage_metadata":{"input_tokens":1}}}}]}`,
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"usage_metadata":{"output_tokens":9,"output_token_details":{"reasoning":2}}}}}]}`,
	// OpenAI Responses usage
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","end_time":"2026-01-01T00:00:01Z","outputs":{"usage":{"input_tokens":8,"output_tokens":2,"input_tokens_details":{"cached_tokens":3},"output_tokens_details":{"reasoning_tokens":1}}}}]}`,
	// POST and PATCH of one run in one batch: extra merged
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","start_time":"2026-01-01T00:00:00Z","extra":{"metadata":{"thread_id":"t1","ls_model_name":"m1"}},"outputs":{"usage_metadata":{"input_tokens":1}}}],
	  "patch":[{"id":"` + scanLLM + `","end_time":"2026-01-01T00:00:01Z","extra":{"metadata":{"run_id":"r1"},"runtime":{"sdk":"js"}},"outputs":{"usage_metadata":{"input_tokens":2,"output_tokens":1}}}]}`,
	// patch group first: posts still come first
	`{"patch":[{"id":"` + scanLLM + `","end_time":"2026-01-01T00:00:01Z"}],"other":[1,{"a":null}],"post":[{"id":"` + scanLLM + `","run_type":"llm","start_time":"2026-01-01T00:00:00Z"}]}`,
	// label-bound values past the bound: the run is refused, its neighbour taken
	`{"post":[{"id":"` + scanLLM + `","run_type":"llm","outputs":{"llm_output":{"model_name":"` + strings.Repeat("m", 257) + `"}}},
	  {"id":"` + scanTool + `","name":"` + strings.Repeat("n", 256) + `","tags":["subagent:` + strings.Repeat("s", 200) + `"]},
	  {"id":"` + scanRoot + `","extra":{"metadata":{"ls_provider":"` + strings.Repeat("p", 257) + `"}}}]}`,
	// what a decoder reading JSON its own way could get wrong: duplicate and
	// case-variant keys, a non-string error, a null tag, a number float64 cannot hold,
	// trailing data, bad ids, bad shapes
	`{"post":[{"id":"` + scanLLM + `"}],"post":[]}`,
	`{"Post":[{"id":"` + scanLLM + `"}]}`,
	`{"post":[{"ID":"` + scanLLM + `"}]}`,
	`{"post":[{"id":"` + scanLLM + `","error":{"code":1}}]}`,
	`{"post":[{"id":"` + scanLLM + `","tags":[null]}]}`,
	`{"post":[{"id":"` + scanLLM + `","outputs":{"a":1e400}}]}`,
	`{"post":[{"id":"` + scanLLM + `"}]} x`,
	`{"post":[{"id":"nope"}]}`,
	`{"post":{}}`,
	`{}`,
}

func TestBatchDecoderReadsWhatEncodingJSONReads(t *testing.T) {
	accepted := 0
	for _, body := range scanBodies {
		if checkBatchDecoder(t, []byte(body)) {
			accepted++
		}
	}
	require.Equal(t, len(scanBodies)-2, accepted, "all but trailing data and post not an array")
}

func FuzzBatchDecoder(f *testing.F) {
	for _, b := range scanBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkBatchDecoder(t, body) })
}

// The one decoder on the inputs the removed decoders once disagreed on.
func TestBatchDecoderBehaviour(t *testing.T) {
	run := func(fields string) string {
		return `{"post":[{"id":"` + scanLLM + `"` + fields + `}]}`
	}
	one := func(t *testing.T, body string) Run {
		t.Helper()
		ops, errs, err := DecodeBatch([]byte(body))
		require.NoError(t, err)
		require.Empty(t, errs)
		require.Len(t, ops, 1)
		return ops[0].Run
	}
	t.Run("escapes in keys and values", func(t *testing.T) {
		r := one(t, `{"p\u006fst":[{"\u0069d":"`+scanLLM+`","name":"a\"b\u00e9\n","run_t\u0079pe":"llm","extra":{"metadata":{"ls_model_n\u0061me":"m"}}}]}`)
		assert.Equal(t, scanLLM, r.ID)
		assert.Equal(t, "a\"bé\n", r.Name)
		assert.Equal(t, "llm", r.RunType)
		assert.Equal(t, "m", metadata(&r).firstString("ls_model_name"))
	})
	t.Run("duplicate keys: the last wins, its error too", func(t *testing.T) {
		r := one(t, run(`,"name":1,"name":"n","end_time":{},"end_time":1767225601000`))
		assert.Equal(t, "n", r.Name)
		assert.Equal(t, time.UnixMilli(1767225601000).UTC(), r.End)
		ops, errs, err := DecodeBatch([]byte(`{"post":[{"id":"` + scanLLM + `"}],"post":[{"id":"` + scanTool + `"}]}`))
		require.NoError(t, err)
		require.Empty(t, errs)
		require.Len(t, ops, 1)
		assert.Equal(t, scanTool, ops[0].Run.ID)
	})
	t.Run("numbers as strings and epoch times", func(t *testing.T) {
		r := one(t, run(`,"run_type":"llm","start_time":1767225600,"end_time":"1767225601500","outputs":{"usage_metadata":{"input_tokens":"12","output_tokens":3.0}}`))
		assert.Equal(t, time.Unix(1767225600, 0).UTC(), r.Start)
		assert.Equal(t, time.UnixMilli(1767225601500).UTC(), r.End)
		u, _, ok := usageOf(&r, r.outputView())
		require.True(t, ok)
		assert.Equal(t, genai.Usage{Input: 12, Output: 3}, u)
	})
	t.Run("null fields are absent", func(t *testing.T) {
		r := one(t, run(`,"name":null,"start_time":null,"inputs":null,"outputs":null,"extra":null,"error":null,"tags":null,"trace_id":null`))
		assert.Equal(t, Run{ID: scanLLM, Posted: true}, r)
	})
	t.Run("non-string error and tags", func(t *testing.T) {
		r := one(t, run(`,"error":{"code": 1, "msg":"x"},"tags":["a",null,2,"subagent:b"]`))
		assert.Equal(t, `{"code":1,"msg":"x"}`, r.Error)
		assert.Equal(t, []string{"a", "subagent:b"}, r.Tags)
	})
	t.Run("big numbers and deep nesting are JSON", func(t *testing.T) {
		deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
		r := one(t, run(`,"outputs":{"a":1e400,"b":`+deep+`}`))
		assert.Len(t, r.outputs, len(`{"a":1e400,"b":`+deep+`}`))
		_, _, err := DecodeBatch([]byte(run(`,"outputs":{"b":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`)))
		require.ErrorIs(t, err, ErrBody, "deeper than encoding/json reads")
		assert.Contains(t, err.Error(), "nested deeper than 10000 levels")
	})
	t.Run("keys are case-sensitive", func(t *testing.T) {
		_, errs, err := DecodeBatch([]byte(`{"post":[{"ID":"` + scanLLM + `"}],"Patch":[{"id":"x"}]}`))
		require.NoError(t, err)
		require.Len(t, errs, 1)
		assert.Equal(t, "post[0].id: is required", errs[0].Message)
	})
	t.Run("bad types name the field", func(t *testing.T) {
		_, errs, err := DecodeBatch([]byte(`{"post":[{"id":"` + scanLLM + `"},"x",{"id":"` + scanTool + `","end_time":true,"name":[],"outputs":[1],"tags":{}}],
			"patch":[{"id":"` + scanLLM + `","trace_id":"nope","start_time":"yesterday"}]}`))
		require.NoError(t, err)
		require.Len(t, errs, 3)
		assert.Equal(t, ItemError{Field: "post[1]", Message: "post[1]: must be a JSON object"}, errs[0])
		assert.Equal(t, "post[2]", errs[1].Field)
		for _, f := range []string{"post[2].name: must be a string", "post[2].end_time: not an RFC 3339", "post[2].outputs: must be a JSON object", "post[2].tags: must be an array of strings"} {
			assert.Contains(t, errs[1].Message, f)
		}
		assert.Contains(t, errs[2].Message, "patch[0].trace_id: must be a UUID")
		assert.Contains(t, errs[2].Message, "patch[0].start_time: not an RFC 3339")
	})
	t.Run("not JSON names the byte", func(t *testing.T) {
		_, _, err := DecodeBatch([]byte(`{"post":[{"id":"` + scanLLM + `","name":"x}]}`))
		require.ErrorIs(t, err, ErrBody)
		assert.Contains(t, err.Error(), "invalid JSON at byte")
		_, _, err = DecodeBatch([]byte(`{"post":[{"id":1 2}]}`))
		assert.Contains(t, err.Error(), "invalid JSON at byte 17")
	})
}

// The same for /runs/batch bodies read into a recycled buffer.
func TestPooledBatchParkedRunSurvivesBufferReuse(t *testing.T) {
	post := []byte(`{"post":[{"id":"` + scanLLM + `","run_type":"llm","start_time":"2026-01-01T00:00:00Z","trace_id":"` + scanRoot + `",
	  "outputs":{"usage_metadata":{"input_tokens":7,"output_tokens":2}},"extra":{"metadata":{"ls_model_name":"gpt-x","thread_id":"th-1"}}}]}`)
	tr := NewTranslator(time.Minute, 10)
	ops, errs, release, err := DecodeBatchPooled(bytes.NewReader(post), int64(len(post)))
	require.NoError(t, err)
	require.Empty(t, errs)
	prep := Prepare(ops)
	p := tr.Plan(ops)
	require.Len(t, p.Park, 1)
	p.Build()
	p.Commit(t0)
	p.Release()
	prep.Release()
	release()
	scribbleReadBuffer()
	patch := []byte(`{"patch":[{"id":"` + scanLLM + `","end_time":"2026-01-01T00:00:01Z"}]}`)
	ops, errs, release, err = DecodeBatchPooled(bytes.NewReader(patch), int64(len(patch)))
	require.NoError(t, err)
	require.Empty(t, errs)
	defer release()
	assertHeldRunSpan(t, spansOf(tr.Plan(ops).Build()))
}
