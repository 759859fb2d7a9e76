package tool

import (
	"errors"
	"fmt"

	"github.com/agentmeter/agentmeter/runtime/sandbox"
)

// str returns args[key] as a string ("" when absent). ValidateArgs has checked types.
func str(args map[string]any, key string) string {
	s, _ := args[key].(string)
	return s
}

func boolArg(args map[string]any, key string) bool {
	b, _ := args[key].(bool)
	return b
}

func intArg(args map[string]any, key string) (int, bool) {
	f, ok := args[key].(float64)
	return int(f), ok
}

// ErrNoSandbox is returned by file and shell tools when the run has no sandbox.
var ErrNoSandbox = errors.New("no sandbox is configured for this run")

func sandboxOf(call Call) (sandbox.Sandbox, error) {
	if call.Env == nil || call.Env.Sandbox == nil {
		return nil, ErrNoSandbox
	}
	return call.Env.Sandbox, nil
}

// schema helpers keep the specs short and uniform.
func object(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func strProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}

func describe(desc string) map[string]any {
	return strProp("Explain why you are running this tool, in a few words. " + desc)
}

func errorf(format string, a ...any) Result {
	return Result{Content: "Error: " + fmt.Sprintf(format, a...), Status: "error"}
}
