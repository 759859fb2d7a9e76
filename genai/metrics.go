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
