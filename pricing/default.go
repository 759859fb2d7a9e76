package pricing

import (
	"bytes"
	_ "embed"
	"fmt"

	"go.yaml.in/yaml/v3"
)

//go:embed prices.yaml
var defaultPrices []byte

// DefaultRows returns the embedded default table's rows (a fresh copy each call).
func DefaultRows() []Row {
	rows, err := ParseRows(defaultPrices)
	if err != nil { // the embedded file is checked by TestDefaultTableLoads
		panic(fmt.Sprintf("pricing: embedded prices.yaml: %v", err))
	}
	return rows
}

// ParseRows reads rows in agentmeter's own format (a YAML or JSON list of rows, like
// prices.yaml). Unknown fields are errors, so a misspelt rate is not silently dropped.
func ParseRows(data []byte) ([]Row, error) {
	var rows []Row
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rows); err != nil {
		return nil, fmt.Errorf("price rows: %w", err)
	}
	return rows, nil
}
