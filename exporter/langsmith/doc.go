// Package langsmith is the native LangSmith traces exporter (type "langsmith"): every
// span becomes a LangSmith run sent to POST /runs/multipart (POST /runs/batch on
// deployments without it), with deterministic run ids, the vendor's dotted_order, and
// inclusive usage_metadata on model-call runs. Configuration defaults come from
// DeerFlow's environment variables (docs/contract.md#exporters); see docs/langsmith.md.
package langsmith // import "github.com/agentmeter/agentmeter/exporter/langsmith"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
