package genai

// GenAI semantic-convention token metrics (semantic-conventions-genai), which replaced
// gen_ai.client.token.usage and gen_ai.token.type: one counter per usage kind, broken down
// by gen_ai.token.modality, and two per-operation histograms with the semconv buckets
// (TokenUsageBuckets).
const (
	MetricInferenceUsageInput     = "gen_ai.client.inference.usage.input_tokens"
	MetricInferenceUsageOutput    = "gen_ai.client.inference.usage.output_tokens"
	MetricInferenceUsageCacheRead = "gen_ai.client.inference.usage.cache_read.input_tokens"
	MetricInferenceUsageCacheWrit = "gen_ai.client.inference.usage.cache_write.input_tokens"
	MetricInferenceUsageReasoning = "gen_ai.client.inference.usage.reasoning.output_tokens"
	MetricInferenceOpInput        = "gen_ai.client.inference.operation.input_tokens"
	MetricInferenceOpOutput       = "gen_ai.client.inference.operation.output_tokens"

	AttrTokenModality = "gen_ai.token.modality"
	// TokenModalityUnknown is what semconv says to report when the provider does not break
	// usage down by modality, which no usage attribute of a span does.
	TokenModalityUnknown = "unknown"

	// AttrMetricOverflow marks a metric's overflow series (as the OpenTelemetry SDKs do):
	// calls past the series limit are counted there, without their labels.
	AttrMetricOverflow = "otel.metric.overflow"
)

// MaxLabelBytes is the longest value a label-bound field may hold: a value that can
// become a metric label (model, provider, caller, agent and tool names, service name,
// operation). The receiver refuses a longer one, naming the field; the tokenmetrics
// connector truncates one that reaches it by another way (docs/agentusage.md#limits).
// A label value is one series' name: without a bound, one request could make every
// scrape carry megabytes.
const MaxLabelBytes = 256
