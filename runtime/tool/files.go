package tool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Limits of the file and shell tools' output, so one call cannot flood the context.
const (
	MaxReadBytes   = 256 << 10
	MaxOutputBytes = 64 << 10
	MaxListEntries = 500
)

// Bash runs a shell command in the thread workspace.
type Bash struct {
	Timeout time.Duration // per command; 0 = 60 s
}

func (Bash) Spec() Spec {
	return Spec{
		Name:        "bash",
		Description: "Run a shell command in the thread workspace (/workspace). Output is truncated to 64 KiB.",
		Parameters:  object([]string{"command"}, map[string]any{"command": strProp("the command"), "description": describe("")}),
	}
}

func (b Bash) Call(ctx context.Context, call Call) (Result, error) {
	sb, err := sandboxOf(call)
	if err != nil {
		return Result{}, err
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	out, code, err := sb.Exec(ctx, str(call.Args, "command"), timeout)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return errorf("%v\n%s", err, clipBytes(out, MaxOutputBytes)), nil
	}
	out = clipBytes(out, MaxOutputBytes)
	if code != 0 {
		return Result{Content: fmt.Sprintf("%s\n[exit code %d]", out, code), Status: "error",
			Attributes: map[string]string{"error.type": "exit_status"}}, nil
	}
	if out == "" {
		out = "(no output)"
	}
	return Result{Content: out}, nil
}

// Ls lists a folder of the workspace (two levels deep).
type Ls struct{}

func (Ls) Spec() Spec {
	return Spec{
		Name:        "ls",
		Description: "List files and folders under a path of the workspace, two levels deep.",
		Parameters:  object([]string{"path"}, map[string]any{"path": strProp("folder to list, e.g. /workspace"), "description": describe("")}),
	}
}

func (Ls) Call(_ context.Context, call Call) (Result, error) {
	sb, dir, refused, err := pathArg(call)
	if err != nil || refused.Status != "" {
		return refused, err
	}
	var lines []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if strings.Count(rel, string(filepath.Separator)) >= 2 {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			rel += "/"
		}
		lines = append(lines, rel)
		if len(lines) >= MaxListEntries {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return Result{Content: "(empty)"}, nil
	}
	return Result{Content: strings.Join(lines, "\n")}, nil
}

var errStop = errors.New("stop")

// ReadFile reads a text file of the workspace, optionally a line range.
type ReadFile struct{}

func (ReadFile) Spec() Spec {
	return Spec{
		Name:        "read_file",
		Description: "Read a text file of the workspace. start_line and end_line (1-based, inclusive) select a range.",
		Parameters: object([]string{"path"}, map[string]any{
			"path": strProp("file path"), "description": describe(""),
			"start_line": map[string]any{"type": "integer", "minimum": 1.0},
			"end_line":   map[string]any{"type": "integer", "minimum": 1.0},
		}),
	}
}

func (ReadFile) Call(_ context.Context, call Call) (Result, error) {
	sb, p, refused, err := pathArg(call)
	if err != nil || refused.Status != "" {
		return refused, err
	}
	data, err := readLimited(p, MaxReadBytes)
	if err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	text := string(data)
	start, hasStart := intArg(call.Args, "start_line")
	end, hasEnd := intArg(call.Args, "end_line")
	if hasStart || hasEnd {
		lines := strings.SplitAfter(text, "\n")
		if !hasStart {
			start = 1
		}
		if !hasEnd || end > len(lines) {
			end = len(lines)
		}
		if start > end {
			return errorf("start_line %d is after end_line %d", start, end), nil
		}
		text = strings.Join(lines[start-1:end], "")
	}
	if text == "" {
		text = "(empty)"
	}
	return Result{Content: text}, nil
}

// WriteFile writes (or appends to) a file of the workspace, creating folders.
type WriteFile struct{}

func (WriteFile) Spec() Spec {
	return Spec{
		Name:        "write_file",
		Description: "Write a text file in the workspace (creates folders; overwrites unless append is true).",
		Parameters: object([]string{"path", "content"}, map[string]any{
			"path": strProp("file path"), "content": strProp("file content"), "description": describe(""),
			"append": map[string]any{"type": "boolean"},
		}),
	}
}

func (WriteFile) Call(_ context.Context, call Call) (Result, error) {
	sb, p, refused, err := pathArg(call)
	if err != nil || refused.Status != "" {
		return refused, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if boolArg(call.Args, "append") {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	content := str(call.Args, "content")
	_, werr := f.WriteString(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return errorf("%v", stripRoot(werr, sb.Root())), nil
	}
	return Result{Content: fmt.Sprintf("OK: wrote %d bytes to %s", len(content), str(call.Args, "path"))}, nil
}

// StrReplace replaces text in a file of the workspace.
type StrReplace struct{}

func (StrReplace) Spec() Spec {
	return Spec{
		Name:        "str_replace",
		Description: "Replace old_str with new_str in a workspace file. old_str must occur exactly once unless replace_all is true.",
		Parameters: object([]string{"path", "old_str", "new_str"}, map[string]any{
			"path": strProp("file path"), "old_str": strProp("text to replace"), "new_str": strProp("replacement"),
			"replace_all": map[string]any{"type": "boolean"}, "description": describe(""),
		}),
	}
}

func (StrReplace) Call(_ context.Context, call Call) (Result, error) {
	sb, p, refused, err := pathArg(call)
	if err != nil || refused.Status != "" {
		return refused, err
	}
	data, err := readLimited(p, MaxReadBytes)
	if err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	oldStr, newStr := str(call.Args, "old_str"), str(call.Args, "new_str")
	if oldStr == "" {
		return errorf("old_str must not be empty"), nil
	}
	n := strings.Count(string(data), oldStr)
	switch {
	case n == 0:
		return errorf("old_str not found in %s", str(call.Args, "path")), nil
	case n > 1 && !boolArg(call.Args, "replace_all"):
		return errorf("old_str occurs %d times in %s; make it unique or set replace_all", n, str(call.Args, "path")), nil
	}
	out := strings.ReplaceAll(string(data), oldStr, newStr)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	return Result{Content: fmt.Sprintf("OK: replaced %d occurrence(s) in %s", n, str(call.Args, "path"))}, nil
}

func readLimited(p string, limit int64) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a folder", filepath.Base(p))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d byte limit", filepath.Base(p), st.Size(), limit)
	}
	return os.ReadFile(p)
}

// stripRoot replaces the host workspace path by the virtual root in error texts, so the
// model (and logs) see /workspace/... rather than host paths.
func stripRoot(err error, root string) error {
	return errors.New(strings.ReplaceAll(err.Error(), root, "/workspace"))
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "\n...[truncated]" // no character cut in two
}
