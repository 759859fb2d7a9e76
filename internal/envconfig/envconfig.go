// Package envconfig holds DeerFlow's environment-variable rules for tracing settings
// (docs/contract.md#exporters), shared by both exporters so they
// resolve variables identically.
package envconfig

import (
	"os"
	"strings"
)

// Lookup reads one variable; tests inject a map instead of the process environment.
type Lookup func(name string) string

// OS reads the process environment.
func OS(name string) string { return os.Getenv(name) }

// FromMap reads from a fixed map (tests, and callers that snapshot the environment).
func FromMap(m map[string]string) Lookup {
	return func(name string) string { return m[name] }
}

// First returns the first variable among names whose value is non-empty after trimming
// spaces, and "" when none is. DeerFlow resolves LANGSMITH_* before LANGCHAIN_* this way,
// so LANGSMITH_TRACING=false beats LANGCHAIN_TRACING_V2=true.
func (l Lookup) First(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(l(n)); v != "" {
			return v
		}
	}
	return ""
}

// FirstOr is First with a default for when every variable is empty.
func (l Lookup) FirstOr(def string, names ...string) string {
	if v := l.First(names...); v != "" {
		return v
	}
	return def
}

// Enabled applies DeerFlow's truthy rule to the first non-empty variable: enabled iff
// it is 1, true, yes or on, case-insensitive.
func (l Lookup) Enabled(names ...string) bool {
	return Truthy(l.First(names...))
}

// Truthy reports whether v is one of DeerFlow's truthy spellings.
func Truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}
