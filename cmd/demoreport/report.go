package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/spaniter"
)

// RunResult is `agentmeter run --json`: {"answer", "thread_id", "run_id", "trace_id", "completion"}.
type RunResult struct {
	Answer     string     `json:"answer"`
	ThreadID   string     `json:"thread_id"`
	RunID      string     `json:"run_id"`
	TraceID    string     `json:"trace_id"`
	Completion Completion `json:"completion"`
}

// Completion is the part of the journal's CompletionData the demo checks (DeerFlow's names).
type Completion struct {
	TotalInputTokens  int64 `json:"total_input_tokens"`
	TotalOutputTokens int64 `json:"total_output_tokens"`
	TotalTokens       int64 `json:"total_tokens"`
	LLMCallCount      int64 `json:"llm_call_count"`
	LeadAgentTokens   int64 `json:"lead_agent_tokens"`
	SubagentTokens    int64 `json:"subagent_tokens"`
	MiddlewareTokens  int64 `json:"middleware_tokens"`
	// keyed by the model that answered (DeerFlow's response model_name)
	TokenUsageByModel map[string]ModelTotals `json:"token_usage_by_model"`
	// the journal's cost keys (docs/cost.md#the-runtime)
	TotalCostUSD    float64            `json:"total_cost_usd"`
	CostUSDByCaller map[string]float64 `json:"cost_usd_by_caller"`
	CostUSDByModel  map[string]float64 `json:"cost_usd_by_model"`
	Unpriced        int64              `json:"unpriced_llm_call_count"`
}

// ModelTotals is one entry of token_usage_by_model.
type ModelTotals struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// Add sums two journals (several demo runs).
func (c Completion) Add(o Completion) Completion {
	c.TotalInputTokens += o.TotalInputTokens
	c.TotalOutputTokens += o.TotalOutputTokens
	c.TotalTokens += o.TotalTokens
	c.LLMCallCount += o.LLMCallCount
	c.LeadAgentTokens += o.LeadAgentTokens
	c.SubagentTokens += o.SubagentTokens
	c.MiddlewareTokens += o.MiddlewareTokens
	if len(o.TokenUsageByModel) > 0 && c.TokenUsageByModel == nil {
		c.TokenUsageByModel = map[string]ModelTotals{}
	} else if c.TokenUsageByModel != nil {
		m := make(map[string]ModelTotals, len(c.TokenUsageByModel))
		for k, v := range c.TokenUsageByModel {
			m[k] = v
		}
		c.TokenUsageByModel = m
	}
	for k, v := range o.TokenUsageByModel {
		cur := c.TokenUsageByModel[k]
		cur.InputTokens += v.InputTokens
		cur.OutputTokens += v.OutputTokens
		cur.TotalTokens += v.TotalTokens
		c.TokenUsageByModel[k] = cur
	}
	c.TotalCostUSD += o.TotalCostUSD
	c.Unpriced += o.Unpriced
	c.CostUSDByCaller = addCosts(c.CostUSDByCaller, o.CostUSDByCaller)
	c.CostUSDByModel = addCosts(c.CostUSDByModel, o.CostUSDByModel)
	return c
}

// ByCaller is the journal's split of total tokens over the three caller buckets.
func (c Completion) ByCaller() map[string]int64 {
	return map[string]int64{
		genai.BucketLeadAgent:  c.LeadAgentTokens,
		genai.BucketSubagent:   c.SubagentTokens,
		genai.BucketMiddleware: c.MiddlewareTokens,
	}
}

// Call is one model call (a span carrying own usage) as the collector exported it.
type Call struct {
	TraceID    string
	SpanID     string
	Start      uint64
	Caller     string
	Model      string // the model that answered (gen_ai.response.model), else the requested one
	StepKind   string
	Own        genai.Usage
	HasMerged  bool
	Merged     genai.Usage // agentmeter.subagent.* written by subagentmerge
	Dispatches int64
	Cost       float64 // agentmeter.cost.usd written by genaicost
	Priced     bool
}

// CallsFromTraces lists the spans that carry own usage, in start order, keeping only the
// given trace ids when any are given.
func CallsFromTraces(tds []ptrace.Traces, traceIDs map[string]bool) []Call {
	var calls []Call
	seen := map[string]bool{} // a span exported twice (a retried batch) is counted once
	for sp := range spaniter.In(tds) {
		tid := sp.TraceID().String()
		if len(traceIDs) > 0 && !traceIDs[tid] {
			continue
		}
		a := sp.Attributes()
		own, ok := genai.UsageFromMap(a)
		if !ok {
			continue
		}
		key := tid + "/" + sp.SpanID().String()
		if seen[key] {
			continue
		}
		seen[key] = true
		c := Call{TraceID: tid, SpanID: sp.SpanID().String(), Start: uint64(sp.StartTimestamp()), Own: own,
			Caller: genai.StringAttr(a, genai.AttrCaller), Model: genai.StringAttr(a, genai.AttrResponseModel), StepKind: genai.StringAttr(a, genai.AttrStepKind)}
		if c.Model == "" {
			c.Model = genai.StringAttr(a, genai.AttrRequestModel)
		}
		if m, ok := genai.SubagentUsageFromMap(a); ok {
			c.HasMerged, c.Merged = true, m
		}
		if v, ok := a.Get(genai.AttrSubagentDispatches); ok {
			c.Dispatches = v.Int()
		}
		if cost, _, ok := genai.CostFromMap(a); ok {
			c.Cost, c.Priced = cost.Total, true
		}
		calls = append(calls, c)
	}
	sort.SliceStable(calls, func(i, j int) bool {
		if calls[i].TraceID != calls[j].TraceID {
			return calls[i].TraceID < calls[j].TraceID
		}
		return calls[i].Start < calls[j].Start
	})
	return calls
}

// SpanTotals sums own usage over calls: the whole of it and input+output per caller
// bucket, and the same for own cost.
type SpanTotals struct {
	Usage    genai.Usage
	ByCaller map[string]int64 // input+output per caller bucket
	ByModel  map[string]int64 // input+output per model
	Calls    int
	Cost     CostTotals
	Unpriced int // calls without a cost
}

// Totals adds up the calls' own usage and cost (never the merged block).
func Totals(calls []Call) SpanTotals {
	t := SpanTotals{ByCaller: map[string]int64{}, ByModel: map[string]int64{}, Cost: newCostTotals()}
	for _, c := range calls {
		bucket := genai.CallerBucket(c.Caller)
		t.Usage = t.Usage.Add(c.Own)
		t.ByCaller[bucket] += c.Own.Total()
		t.ByModel[c.Model] += c.Own.Total()
		t.Calls++
		if c.Priced {
			t.Cost.add(bucket, c.Model, c.Cost)
		} else {
			t.Unpriced++
		}
	}
	return t
}

// AllKinds is the sum of the five token kinds, what sum(agentmeter_tokens_total) adds up.
func AllKinds(u genai.Usage) int64 {
	var n int64
	for _, k := range u.Kinds() {
		n += k.Tokens
	}
	return n
}

// PromSample is one line of a Prometheus text exposition.
type PromSample struct {
	Name   string
	Labels map[string]string
	Value  float64
	Line   string
}

// ParsePromText reads the samples of metric name from a text exposition (what the
// collector's prometheus exporter serves). Comments and other metrics are skipped.
func ParsePromText(r io.Reader, name string) ([]PromSample, error) {
	var out []PromSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		s, err := parsePromLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parsePromLine(line string) (PromSample, error) {
	s := PromSample{Labels: map[string]string{}, Line: line}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, "=\"")
			if eq < 0 {
				return s, fmt.Errorf("metrics line %q: bad label set", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				ch := rest[j]
				if ch == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if ch == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(ch)
			}
			if !closed {
				return s, fmt.Errorf("metrics line %q: unterminated label value", line)
			}
			s.Labels[key] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("metrics line %q: value: %w", line, err)
	}
	s.Value = v
	return s, nil
}

// PromTotals sums agentmeter_tokens_total samples: everything, input+output, and
// input+output per caller bucket.
type PromTotals struct {
	All         float64
	InputOutput float64
	ByCaller    map[string]float64 // input+output
	ByModel     map[string]float64 // input+output
	Cost        CostTotals         // agentmeter_cost_usd_total, set by SumCost
}

// SumTokens adds up agentmeter_tokens_total samples.
func SumTokens(samples []PromSample) PromTotals {
	t := PromTotals{ByCaller: map[string]float64{}, ByModel: map[string]float64{}}
	for _, s := range samples {
		t.All += s.Value
		if tt := s.Labels[genai.LabelTokenType]; tt == genai.TokenTypeInput || tt == genai.TokenTypeOutput {
			t.InputOutput += s.Value
			t.ByCaller[s.Labels[genai.LabelCaller]] += s.Value
			t.ByModel[s.Labels[genai.LabelModel]] += s.Value
		}
	}
	return t
}

// Check compares the three accounts of one demo: the journals (summed over runs), the
// exported spans' own usage and cost and the Prometheus counters. Every disagreement is
// returned.
func Check(journal Completion, spans SpanTotals, prom PromTotals) error {
	var errs []error
	if journal.TotalTokens != spans.Usage.Total() {
		errs = append(errs, fmt.Errorf("journal total_tokens %d != span own usage input+output %d", journal.TotalTokens, spans.Usage.Total()))
	}
	if journal.TotalInputTokens != spans.Usage.Input || journal.TotalOutputTokens != spans.Usage.Output {
		errs = append(errs, fmt.Errorf("journal input/output %d/%d != span input/output %d/%d",
			journal.TotalInputTokens, journal.TotalOutputTokens, spans.Usage.Input, spans.Usage.Output))
	}
	if prom.InputOutput != float64(spans.Usage.Total()) {
		errs = append(errs, fmt.Errorf("prometheus agentmeter_tokens_total{token_type=~\"input|output\"} %v != span input+output %d", prom.InputOutput, spans.Usage.Total()))
	}
	if prom.All != float64(AllKinds(spans.Usage)) {
		errs = append(errs, fmt.Errorf("prometheus sum(agentmeter_tokens_total) %v != span sum over the five token kinds %d", prom.All, AllKinds(spans.Usage)))
	}
	for bucket, want := range journal.ByCaller() {
		if got := spans.ByCaller[bucket]; got != want {
			errs = append(errs, fmt.Errorf("caller %s: journal %d != spans %d", bucket, want, got))
		}
		if got := prom.ByCaller[bucket]; got != float64(want) {
			errs = append(errs, fmt.Errorf("caller %s: journal %d != prometheus %v", bucket, want, got))
		}
	}
	errs = append(errs, checkCost(journal, spans, prom)...)
	// llm_call_count is not compared: DeerFlow's journal counts the calls it observed
	// itself (lead agent and middlewares), while subagent usage arrives as external records
	for model, mt := range journal.TokenUsageByModel {
		if got := spans.ByModel[model]; got != mt.TotalTokens {
			errs = append(errs, fmt.Errorf("model %s: journal %d != spans %d", model, mt.TotalTokens, got))
		}
		if got := prom.ByModel[model]; got != float64(mt.TotalTokens) {
			errs = append(errs, fmt.Errorf("model %s: journal %d != prometheus %v", model, mt.TotalTokens, got))
		}
	}
	return errors.Join(errs...)
}

// WriteCallTable prints one row per model call: own usage and cost, and the merged
// subagent usage on the dispatching call ("-" on the others).
func WriteCallTable(w io.Writer, calls []Call) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tcaller\tmodel\tstep\tinput\toutput\tcache_read\treasoning\ttotal\tcost_usd\tsubagents: input\toutput\ttotal\tdispatches")
	var own genai.Usage
	var cost float64
	for i, c := range calls {
		merged := "-\t-\t-\t-"
		if c.HasMerged {
			merged = fmt.Sprintf("%d\t%d\t%d\t%d", c.Merged.Input, c.Merged.Output, c.Merged.Total(), c.Dispatches)
		}
		step := c.StepKind
		if step == "" {
			step = "-"
		}
		usd := "unpriced"
		if c.Priced {
			usd = fmt.Sprintf("%.6f", c.Cost)
			cost += c.Cost
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", i+1, c.Caller, c.Model, step,
			c.Own.Input, c.Own.Output, c.Own.CacheRead, c.Own.Reasoning, c.Own.Total(), usd, merged)
		own = own.Add(c.Own)
	}
	fmt.Fprintf(tw, "\tall calls\t\t\t%d\t%d\t%d\t%d\t%d\t%.6f\t\t\t\t\n", own.Input, own.Output, own.CacheRead, own.Reasoning, own.Total(), cost)
	return tw.Flush()
}

// ReadTracesFile reads a file exporter's JSON lines. A missing file is no traces; a
// partial last line (the exporter mid-write) is left for the next read.
func ReadTracesFile(path string) ([]ptrace.Traces, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []ptrace.Traces
	var um ptrace.JSONUnmarshaler
	for _, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		td, err := um.UnmarshalTraces(line)
		if err != nil {
			break
		}
		out = append(out, td)
	}
	return out, nil
}
