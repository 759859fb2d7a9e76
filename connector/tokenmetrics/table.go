package tokenmetrics

import (
	"sort"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/agentmeter/agentmeter/genai"
)

// labelKey is the identity of one label set in a table. clone copies the strings, which
// point into a span's attributes while the key is only looked up.
type labelKey[K any] interface {
	comparable
	clone() K
}

// series is one label set's running totals since start.
type series[K any, V any] struct {
	key   K
	res   int32 // index into connector.resources
	start pcommon.Timestamp
	gen   uint64 // last flush period that touched it, to list it once in touched
	v     V
}

type seriesKey[K any] struct {
	res int32
	key K
}

// table holds one metric set's series. Its size is bounded: past max label sets, new
// ones go to the one overflow series, so memory stays flat whatever the emitters send.
type table[K labelKey[K], V any] struct {
	name     string // metric set, for telemetry and the log line
	max      int
	m        map[seriesKey[K]]*series[K, V]
	overflow *series[K, V]
	// touched lists the series changed since the last flush, in first-touch order.
	touched []*series[K, V]

	overflowCalls int64 // calls counted into overflow since the last flush
	warned        bool
}

func newTable[K labelKey[K], V any](name string, max int) *table[K, V] {
	return &table[K, V]{name: name, max: max, m: make(map[seriesKey[K]]*series[K, V])}
}

// get returns the series for (res, k), creating it (or falling back to the overflow
// series) as needed, and marks it touched in flush period gen.
func (t *table[K, V]) get(res int32, k K, gen uint64, now pcommon.Timestamp) *series[K, V] {
	s, ok := t.m[seriesKey[K]{res, k}]
	if !ok {
		if len(t.m) < t.max {
			k = k.clone()
			s = &series[K, V]{key: k, res: res, start: now}
			t.m[seriesKey[K]{res, k}] = s
		} else {
			if t.overflow == nil {
				t.overflow = &series[K, V]{res: overflowResource, start: now}
			}
			s = t.overflow
			t.overflowCalls++
		}
	}
	if s.gen != gen {
		s.gen = gen
		t.touched = append(t.touched, s)
	}
	return s
}

// isOverflow reports whether s is the overflow series.
func (t *table[K, V]) isOverflow(s *series[K, V]) bool { return s == t.overflow }

// len is the number of label sets held, the overflow series included.
func (t *table[K, V]) len() int {
	n := len(t.m)
	if t.overflow != nil {
		n++
	}
	return n
}

// endFlush forgets the touched list, keeping its memory for the next period.
func (t *table[K, V]) endFlush() {
	clear(t.touched)
	t.touched = t.touched[:0]
}

// agentmeterKey is the label set of agentmeter.tokens (token_type aside).
type agentmeterKey struct{ caller, agent, model, provider string }

func (k agentmeterKey) clone() agentmeterKey {
	// caller is one of genai's bucket constants, never a span's string
	return agentmeterKey{k.caller, strings.Clone(k.agent), strings.Clone(k.model), strings.Clone(k.provider)}
}

// semconvKey is the attribute set GenAI semconv gives its token metrics (modality and
// token type aside).
type semconvKey struct {
	operation, provider, requestModel, responseModel, serverAddress string
	serverPort                                                      int64
}

func (k semconvKey) clone() semconvKey {
	return semconvKey{strings.Clone(k.operation), strings.Clone(k.provider), strings.Clone(k.requestModel),
		strings.Clone(k.responseModel), strings.Clone(k.serverAddress), k.serverPort}
}

// tokenUsageKey is the attribute set of the deprecated gen_ai.client.token.usage.
type tokenUsageKey struct{ operation, provider, requestModel, responseModel string }

func (k tokenUsageKey) clone() tokenUsageKey {
	return tokenUsageKey{strings.Clone(k.operation), strings.Clone(k.provider), strings.Clone(k.requestModel), strings.Clone(k.responseModel)}
}

// kinds are the five usage kinds in genai.Usage.Kinds order; seen marks which of them a
// series has been given, so a label set only gets the series its calls reported.
type kinds struct {
	tokens [5]int64
	seen   uint8
}

// add counts u. Input and output always make series (a call that reported usage used
// some, possibly 0); the detail kinds only once one is non-zero, as the runtime writes
// them only then.
func (k *kinds) add(u genai.Usage) {
	for i, kv := range u.Kinds() {
		k.tokens[i] += kv.Tokens
		if i < 2 || kv.Tokens != 0 {
			k.seen |= 1 << i
		}
	}
}

// agentmeterValues are one agentmeter label set's token and cost totals.
type agentmeterValues struct {
	kinds
	cost     [6]float64 // genai.Cost.Kinds order
	costSeen uint8
	savings  float64 // cache savings (USD); a series once non-zero
}

// addCost counts c; a cost type makes a series once it has a non-zero amount.
func (v *agentmeterValues) addCost(c genai.Cost) {
	for i, k := range c.Kinds() {
		if k.USD != 0 {
			v.cost[i] += k.USD
			v.costSeen |= 1 << i
		}
	}
}

// bounds are semconv's explicit bucket boundaries for every token histogram.
var bounds = genai.TokenUsageBuckets

// histogram is one cumulative explicit-bucket histogram.
type histogram struct {
	counts   [15]uint64 // len(bounds)+1
	count    uint64
	sum      float64
	min, max float64
}

func (h *histogram) observe(v int64) {
	f := float64(v)
	// bucket i holds (bounds[i-1], bounds[i]]; the last one everything above
	h.counts[sort.SearchFloat64s(bounds, f)]++
	if h.count == 0 || f < h.min {
		h.min = f
	}
	if h.count == 0 || f > h.max {
		h.max = f
	}
	h.count++
	h.sum += f
}

// semconvValues are one semconv label set's counters and histograms.
type semconvValues struct {
	kinds
	input, output histogram
}

// tokenUsageValues is one label set of gen_ai.client.token.usage.
type tokenUsageValues struct{ input, output histogram }
