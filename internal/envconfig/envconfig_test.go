package envconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFirstNonEmptyWins(t *testing.T) {
	l := FromMap(map[string]string{"A": "", "B": "  ", "C": "c", "D": "d"})
	assert.Equal(t, "c", l.First("A", "B", "C", "D"))
	assert.Equal(t, "", l.First("A", "B"))
	assert.Equal(t, "def", l.FirstOr("def", "A"))
	assert.Equal(t, "d", l.FirstOr("def", "D"))
}

func TestTruthy(t *testing.T) {
	for _, v := range []string{"1", "true", "TRUE", "Yes", "on", " ON "} {
		assert.True(t, Truthy(v), v)
	}
	for _, v := range []string{"", "0", "false", "no", "off", "enabled", "2"} {
		assert.False(t, Truthy(v), v)
	}
}

// DeerFlow's test_tracing_config.py:
// test_langsmith_tracing_false_overrides_langchain_tracing_v2_true.
func TestExplicitFalseBeatsLegacyTrue(t *testing.T) {
	l := FromMap(map[string]string{"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "true"})
	assert.False(t, l.Enabled("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"))
	l = FromMap(map[string]string{"LANGCHAIN_TRACING_V2": "true"})
	assert.True(t, l.Enabled("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"))
}
