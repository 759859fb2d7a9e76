// Package langfuse is the agentmeter exporter that sends traces to Langfuse.
//
// It speaks OTLP/HTTP (protobuf, gzip) to {endpoint}/api/public/otel/v1/traces — the
// batch /api/public/ingestion endpoint is deprecated and gone from Langfuse Cloud — and
// shapes every span the way Langfuse's server maps OTel attributes onto traces and
// observations (internal/shape). Its defaults come from DeerFlow's environment variables
// (LANGFUSE_TRACING, LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LANGFUSE_BASE_URL), so a
// bare `langfuse:` entry behaves like DeerFlow's Langfuse provider, including its
// fail-fast message when tracing is enabled without keys. See docs/langfuse.md.
package langfuse

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
