package tool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
)

func env(t *testing.T) (*Env, string) {
	t.Helper()
	sb, err := sandbox.NewLocal(t.TempDir(), "thread")
	require.NoError(t, err)
	return &Env{Sandbox: sb, State: &state.State{}}, sb.Root()
}

// run validates like the agent does, then calls.
func run(t *testing.T, tl Tool, e *Env, args map[string]any) (Result, error) {
	t.Helper()
	if err := ValidateArgs(tl.Spec(), args); err != nil {
		return Result{}, err
	}
	return tl.Call(context.Background(), Call{ID: "c", Name: tl.Spec().Name, Args: args, Env: e})
}

func TestFileToolsStayInWorkspace(t *testing.T) {
	e, root := env(t)
	outside := filepath.Join(t.TempDir(), "victim.txt")
	require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o644))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(root, "link")))

	for _, tc := range []struct {
		tool Tool
		args map[string]any
	}{
		{WriteFile{}, map[string]any{"path": "../escape.txt", "content": "x"}},
		{WriteFile{}, map[string]any{"path": outside, "content": "x"}},
		{WriteFile{}, map[string]any{"path": "link/victim.txt", "content": "x"}},
		{ReadFile{}, map[string]any{"path": "/etc/hostname"}},
		{ReadFile{}, map[string]any{"path": "link/victim.txt"}},
		{StrReplace{}, map[string]any{"path": "link/victim.txt", "old_str": "keep", "new_str": "gone"}},
		{Ls{}, map[string]any{"path": "/"}},
		{PresentFiles{}, map[string]any{"filepaths": []any{"../x"}}},
		{ViewImage{}, map[string]any{"image_path": "link/victim.txt"}},
	} {
		res, err := run(t, tc.tool, e, tc.args)
		require.NoError(t, err)
		assert.Equal(t, message.ToolError, res.Status, "%s %v", tc.tool.Spec().Name, tc.args)
		assert.Contains(t, res.Content, "outside the thread workspace", "%s %v", tc.tool.Spec().Name, tc.args)
		assert.NotContains(t, res.Content, root, "host paths never leak")
	}
	b, _ := os.ReadFile(outside)
	assert.Equal(t, "keep", string(b))
	_, err := os.Stat(filepath.Join(filepath.Dir(root), "escape.txt"))
	assert.True(t, os.IsNotExist(err))
}

func TestFileToolsWork(t *testing.T) {
	e, root := env(t)
	res, err := run(t, WriteFile{}, e, map[string]any{"path": "/workspace/notes/a.txt", "content": "one\ntwo\nthree\n"})
	require.NoError(t, err)
	assert.Equal(t, "OK: wrote 14 bytes to /workspace/notes/a.txt", res.Content)
	res, _ = run(t, WriteFile{}, e, map[string]any{"path": "notes/a.txt", "content": "four\n", "append": true})
	assert.Equal(t, message.ToolStatus(""), res.Status)
	res, _ = run(t, ReadFile{}, e, map[string]any{"path": "notes/a.txt", "start_line": 2.0, "end_line": 3.0})
	assert.Equal(t, "two\nthree\n", res.Content)
	res, _ = run(t, ReadFile{}, e, map[string]any{"path": "notes/a.txt", "start_line": 3.0, "end_line": 2.0})
	assert.Equal(t, "Error: start_line 3 is after end_line 2", res.Content)
	res, _ = run(t, StrReplace{}, e, map[string]any{"path": "notes/a.txt", "old_str": "two", "new_str": "2"})
	assert.Equal(t, "OK: replaced 1 occurrence(s) in notes/a.txt", res.Content)
	res, _ = run(t, StrReplace{}, e, map[string]any{"path": "notes/a.txt", "old_str": "missing", "new_str": "x"})
	assert.Equal(t, "Error: old_str not found in notes/a.txt", res.Content)
	_, _ = run(t, WriteFile{}, e, map[string]any{"path": "dup.txt", "content": "x x"})
	res, _ = run(t, StrReplace{}, e, map[string]any{"path": "dup.txt", "old_str": "x", "new_str": "y"})
	assert.Contains(t, res.Content, "occurs 2 times")
	res, _ = run(t, StrReplace{}, e, map[string]any{"path": "dup.txt", "old_str": "x", "new_str": "y", "replace_all": true})
	assert.Equal(t, message.ToolStatus(""), res.Status)
	b, _ := os.ReadFile(filepath.Join(root, "notes", "a.txt"))
	assert.Equal(t, "one\n2\nthree\nfour\n", string(b))
	res, _ = run(t, Ls{}, e, map[string]any{"path": "/workspace"})
	assert.Equal(t, "dup.txt\nnotes/\nnotes/a.txt", res.Content)
	res, _ = run(t, ReadFile{}, e, map[string]any{"path": "nope.txt"})
	assert.Equal(t, "Error: stat /workspace/nope.txt: no such file or directory", res.Content)

	res, _ = run(t, PresentFiles{}, e, map[string]any{"filepaths": []any{"notes/a.txt"}})
	require.NotNil(t, res.Update)
	assert.Equal(t, []string{"/workspace/notes/a.txt"}, res.Update.Artifacts)
	res, _ = run(t, PresentFiles{}, e, map[string]any{"filepaths": []any{"notes"}})
	assert.Equal(t, message.ToolError, res.Status)
}

func TestBash(t *testing.T) {
	e, _ := env(t)
	res, err := run(t, Bash{}, e, map[string]any{"command": "echo hi > f && cat f"})
	require.NoError(t, err)
	assert.Equal(t, "hi\n", res.Content)
	res, _ = run(t, Bash{}, e, map[string]any{"command": "echo oops; exit 2"})
	assert.Equal(t, message.ToolError, res.Status)
	assert.Equal(t, "oops\n\n[exit code 2]", res.Content)
	res, _ = run(t, Bash{Timeout: 50 * time.Millisecond}, e, map[string]any{"command": "sleep 3"})
	assert.Equal(t, message.ToolError, res.Status)
	assert.Contains(t, res.Content, "deadline exceeded")
	_, err = Bash{}.Call(context.Background(), Call{Args: map[string]any{"command": "true"}, Env: &Env{}})
	assert.ErrorIs(t, err, ErrNoSandbox)
}

func TestValidateArgs(t *testing.T) {
	for _, tc := range []struct {
		tool Tool
		args map[string]any
		want string
	}{
		{WriteFile{}, map[string]any{"content": "x"}, "invalid arguments for write_file: path: is required"},
		{WriteFile{}, map[string]any{"path": 1.0, "content": "x"}, "invalid arguments for write_file: path: must be a string, got number"},
		{WriteFile{}, map[string]any{"path": "a", "content": "x", "mode": "w"}, "invalid arguments for write_file: mode: is not a known argument"},
		{ReadFile{}, map[string]any{"path": "a", "start_line": 1.5}, "invalid arguments for read_file: start_line: must be an integer, got number"},
		{ReadFile{}, map[string]any{"path": "a", "start_line": 0.0}, "invalid arguments for read_file: start_line: must be at least 1"},
		{WriteTodos{}, map[string]any{"todos": []any{map[string]any{"content": "a", "status": "done"}}}, "invalid arguments for write_todos: todos: item 0 status must be one of [pending in_progress completed], got \"done\""},
		{WriteTodos{}, map[string]any{"todos": "a"}, "invalid arguments for write_todos: todos: must be an array, got string"},
		{PresentFiles{}, map[string]any{"filepaths": []any{1.0}}, "invalid arguments for present_files: filepaths: item 0 must be a string, got number"},
		{WriteFile{}, map[string]any{"path": "a", "content": "x", "append": "yes"}, "invalid arguments for write_file: append: must be a boolean, got string"},
	} {
		err := ValidateArgs(tc.tool.Spec(), tc.args)
		require.Error(t, err, tc.want)
		assert.Equal(t, tc.want, err.Error())
	}
}

func TestTodosAndClarification(t *testing.T) {
	res, err := run(t, WriteTodos{}, &Env{}, map[string]any{"todos": []any{
		map[string]any{"content": " Research ", "status": "in_progress"}, map[string]any{"content": "Write", "status": "pending"}}})
	require.NoError(t, err)
	require.NotNil(t, res.Update.Todos)
	assert.Equal(t, []state.Todo{{Content: "Research", Status: "in_progress"}, {Content: "Write", Status: "pending"}}, *res.Update.Todos)
	assert.True(t, strings.HasPrefix(res.Content, "Updated todo list to "))
	_, err = run(t, WriteTodos{}, &Env{}, map[string]any{"todos": []any{map[string]any{"content": " ", "status": "pending"}}})
	assert.EqualError(t, err, "invalid arguments for write_todos: todos[0].content: must not be empty")

	res, err = run(t, AskClarification{}, &Env{}, map[string]any{"question": "Which city?", "context": "Two match.", "options": []any{"Paris", "Lyon"}})
	require.NoError(t, err)
	assert.Equal(t, "Two match.\n\nWhich city?\n  1. Paris\n  2. Lyon", res.Content)
	assert.Equal(t, state.JumpEnd, res.Update.JumpTo)
}

type fixedSearch []SearchResult

func (f fixedSearch) Search(_ context.Context, q string, n int) ([]SearchResult, error) {
	return f, nil
}

func TestWebSearch(t *testing.T) {
	_, err := run(t, WebSearch{}, &Env{}, map[string]any{"query": "x"})
	assert.ErrorIs(t, err, ErrNoSearchProvider)
	ws := WebSearch{Provider: fixedSearch{{"A", "https://a", "sa"}, {"B", "https://b", "sb"}, {"C", "https://c", "sc"}}}
	res, err := run(t, ws, &Env{}, map[string]any{"query": "x", "max_results": 2.0})
	require.NoError(t, err)
	assert.Equal(t, "1. A\n   https://a\n   sa\n2. B\n   https://b\n   sb\n", res.Content)
}

func TestViewImage(t *testing.T) {
	e, root := env(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00")
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.png"), png, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("text"), 0o644))
	res, err := run(t, ViewImage{}, e, map[string]any{"image_path": "a.png"})
	require.NoError(t, err)
	viewed := res.Update.Extra[ViewedImagesKey].(map[string]any)
	assert.Equal(t, "image/png", viewed["a.png"].(map[string]any)["mime_type"])
	res, _ = run(t, ViewImage{}, e, map[string]any{"image_path": "a.txt"})
	assert.Equal(t, message.ToolError, res.Status)
	assert.Contains(t, res.Content, "not a supported image")
}
