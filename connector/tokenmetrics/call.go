package tokenmetrics

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// General semantic-convention keys the semconv metric set carries.
const (
	attrServerAddress = "server.address"
	attrServerPort    = "server.port"
)

// maxCallTokens bounds one call's count of any kind (about 10^12, a thousand times the
// largest context window): anything above is a broken emitter, and summing a few such
// values would overflow a counter.
const maxCallTokens = 1 << 40

// outcome of reading one span; outcomes[o] is the telemetry attribute value.
type outcome int

const (
	outNotModelCall outcome = iota // not counted and not reported: most spans of a trace
	outCounted
	outNoUsage
	outCorrected
	outPending
	outInvalid
	outRepeat // its counted version, counted before (repeats)
)

var outcomes = [...]string{outCounted: "counted", outNoUsage: "no_usage", outCorrected: "corrected", outPending: "pending", outInvalid: "invalid", outRepeat: "repeat"}

// call is what the metrics need from one model-call span. Its strings point into the
// span's attributes; a table copies them only when it creates a series.
type call struct {
	usage genai.Usage
	// cost is the call's own cost (agentmeter.cost.*, written by the cost step or the
	// emitter), when it has one: hasCost is false for an unpriced call.
	cost    genai.Cost
	hasCost bool
	savings float64 // agentmeter.cost.cache_savings_usd, 0 when absent

	caller, agent, model, provider string // agentmeter labels

	operation, requestModel, responseModel, serverAddress string // semconv attributes
	serverPort                                            int64
}

// readCall applies the counting rules to one span: only model-call spans
// (genai.IsModelCallSpan) count; a re-emitted correction of a dispatching call was
// counted when it first passed and is skipped; the span's own usage is read with
// genai.UsageFromMap (so cache_write counts when cache_creation is absent), never the
// merged agentmeter.subagent.* block. A negative or absurd (above maxCallTokens) count
// means the emitter is broken: the whole call is skipped rather than letting a counter
// go down or overflow.
func readCall(sp ptrace.Span, c *call) outcome {
	attrs := sp.Attributes()
	name := sp.Name()
	cls := genai.Classify(name, attrs)
	if cls.Kind != genai.SpanModelCall {
		return outNotModelCall
	}
	// one pass over the attributes for the usage, the cost, the merge status and the label
	// sources, instead of a search of the attributes for each
	var own genai.OwnAttrs
	var ver genai.Version
	var callerTag, agentName string
	var savings float64
	lb := call{operation: cls.Operation}
	for k, v := range attrs.All() {
		if own.Offer(k, v) || ver.Offer(k, v) {
			continue
		}
		switch k {
		case genai.AttrCaller:
			callerTag = str(v)
		case genai.AttrAgentName:
			agentName = str(v)
		case genai.AttrResponseModel:
			lb.responseModel = str(v)
		case genai.AttrRequestModel:
			lb.requestModel = str(v)
		case genai.AttrProviderName:
			lb.provider = str(v)
		case attrServerAddress:
			lb.serverAddress = str(v)
		case genai.AttrCostCacheSavings:
			if v.Type() == pcommon.ValueTypeDouble && v.Double() > 0 {
				savings = v.Double()
			}
		case attrServerPort:
			if v.Type() == pcommon.ValueTypeInt {
				lb.serverPort = v.Int()
			}
		}
	}
	// genai.IsCountedVersion's rule, read in the same pass: a re-emission was counted
	// when first sent, except the one that settles a pending caller, which the first
	// emission waited for (docs/contract.md#merge)
	if !ver.Counted() {
		if ver.Pending {
			return outPending
		}
		return outCorrected
	}
	u, ok := own.Usage()
	if !ok {
		return outNoUsage
	}
	for _, k := range u.Kinds() {
		if k.Tokens < 0 || k.Tokens > maxCallTokens {
			return outInvalid
		}
	}
	*c = lb
	c.usage = u
	if cost, _, ok := own.Cost(); ok && validCost(cost) {
		c.cost, c.hasCost = cost, true
		c.savings = savings
	}
	c.caller = genai.CallerBucket(callerTag)
	c.agent = agentLabel(agentName, callerTag)
	c.model = c.responseModel
	if c.model == "" {
		c.model = c.requestModel
	}
	return outCounted
}

// validCost rejects a negative amount, which would lower a counter; the call's tokens
// still count.
func validCost(c genai.Cost) bool {
	for _, k := range c.Kinds() {
		if k.USD < 0 {
			return false
		}
	}
	return c.Total >= 0
}

// agentLabel is gen_ai.agent.name when the call carries it; else the subagent named by
// a "subagent:<name>" caller tag (the name of that subagent's invoke_agent span); else
// the lead agent, under whose span the lead's and the middlewares' calls run.
func agentLabel(agentName, callerTag string) string {
	if agentName != "" {
		return agentName
	}
	if name, ok := strings.CutPrefix(callerTag, genai.BucketSubagent+":"); ok && name != "" {
		return name
	}
	return genai.LeadAgentName
}

// str reads a label source; only strings are labels (a number or a map where a name
// belongs is treated as absent rather than stringified into a new series).
func str(v pcommon.Value) string {
	if v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return boundLabel(v.Str())
}

// boundLabel makes a label value valid UTF-8 and truncates one longer than
// genai.MaxLabelBytes (the agentusage receiver refuses one; other receivers may pass it)
// to that many bytes, at a character boundary: the series keeps the value's start, which
// names it, and a scrape stays small. Each run of invalid bytes becomes one U+FFFD: the
// Prometheus exporter drops, at every scrape, a series whose label is not UTF-8, and
// the call's tokens with it. OTLP strings must be UTF-8, but the receivers do not check.
func boundLabel(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= genai.MaxLabelBytes {
		return s
	}
	n := genai.MaxLabelBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
