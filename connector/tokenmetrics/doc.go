// Package tokenmetrics is a connector (traces in, metrics out) that turns model-call spans
// into token metrics: agentmeter.tokens (agentmeter_tokens_total) and agentmeter.cost.usd,
// the GenAI semantic conventions' gen_ai.client.inference.usage.* counters and operation
// histograms, and the deprecated gen_ai.client.token.usage histogram. It owns the
// counting rules: only model-call spans' own usage counts (genai.IsModelCallSpan, shared
// with the merge), a re-emitted correction is never counted twice, the
// caller/agent/model/provider labels are derived here and never carry an id, series are
// cumulative with start times, and the number of series is bounded. docs/metrics.md
// describes the metrics.
package tokenmetrics // import "github.com/agentmeter/agentmeter/connector/tokenmetrics"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
