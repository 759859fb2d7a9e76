// Package fielderr is the error of one decoded item that names the offending field, so
// a client is told exactly what to fix ("runs[3].end_time: ...").
package fielderr

import (
	"fmt"

	"github.com/agentmeter/agentmeter/genai"
)

// Error names the offending field of one item.
type Error struct {
	Field string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// New builds an Error for field.
func New(field, format string, args ...any) error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...)}
}

// Label returns an Error for field when value, which can become a metric label, is
// longer than genai.MaxLabelBytes; nil otherwise.
func Label(field, value string) error {
	if len(value) <= genai.MaxLabelBytes {
		return nil
	}
	return New(field, "is %d bytes long; a label-bound field holds at most %d", len(value), genai.MaxLabelBytes)
}
