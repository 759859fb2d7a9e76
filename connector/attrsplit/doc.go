// Package attrsplit is a traces-to-traces connector that splits each batch by whether a
// span carries one attribute: the spans that do go to one list of pipelines, the spans
// that do not to another, and the whole batch, as it came, to a third. It reads its input
// and copies only the spans a list needs, so unlike a forward connector feeding filter
// processors, a batch is never cloned whole to be mostly dropped.
package attrsplit // import "github.com/agentmeter/agentmeter/connector/attrsplit"

//go:generate go tool -modfile=../../internal/tools/go.mod mdatagen metadata.yaml
