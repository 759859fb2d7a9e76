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

// pathArg resolves the call's path argument in its sandbox. A path the sandbox refuses
// (outside the workspace) comes back as the tool's error answer, refused; a call without a
// sandbox is an error.
func pathArg(call Call) (sb sandbox.Sandbox, path string, refused Result, err error) {
	if sb, err = sandboxOf(call); err != nil {
		return nil, "", Result{}, err
	}
	if path, err = sb.Resolve(str(call.Args, "path")); err != nil {
		return nil, "", errorf("%v", err), nil
	}
	return sb, path, Result{}, nil
}

func errorf(format string, a ...any) Result {
	return Result{Content: "Error: " + fmt.Sprintf(format, a...), Status: "error"}
}
