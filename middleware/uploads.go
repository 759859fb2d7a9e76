package middleware

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Uploads constants (DeerFlow's UploadsMiddleware).
const (
	// UploadsVirtualDir is where the model sees uploaded files.
	UploadsVirtualDir = "/mnt/user-data/uploads"
	// MaxUploadsPerSection bounds the files listed per context section.
	MaxUploadsPerSection = 10
	// UploadedFilesKey is the uploaded_files state channel (state.Extra).
	UploadedFilesKey   = "uploaded_files"
	uploadPreviewLines = 5
)

// UploadedFile is one entry of uploaded_files.
type UploadedFile struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Path     string `json:"path"`
}

// UploadsMiddleware injects the current message's uploads (additional_kwargs.files) as a
// <current_uploads> block in front of the user text (DeerFlow's UploadsMiddleware).
type UploadsMiddleware struct{}

// NewUploadsMiddleware returns the middleware.
func NewUploadsMiddleware() *UploadsMiddleware { return &UploadsMiddleware{} }

// Name implements agent.Middleware.
func (*UploadsMiddleware) Name() string { return NameUploads }

// BeforeAgent implements agent.BeforeAgentHook.
func (*UploadsMiddleware) BeforeAgent(_ context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	clear := &state.Update{Extra: map[string]any{UploadedFilesKey: []UploadedFile{}}}
	last, ok := lastMessage(st.Messages)
	if !ok || !last.IsHuman() {
		return clear, nil
	}
	uploadsDir := ""
	if st.ThreadData != nil {
		uploadsDir = st.ThreadData.UploadsPath
	}
	files := filesFromKwargs(last.AdditionalKwargs, uploadsDir)
	if len(files) == 0 {
		return clear, nil
	}
	block := uploadsBlock(files, uploadsDir)
	msg := last.Clone()
	if _, ok := msg.AdditionalKwargs["original_user_content"].(string); !ok {
		msg.AdditionalKwargs["original_user_content"] = last.Content
	}
	msg.Content = block + "\n\n" + last.Content
	return &state.Update{Messages: []message.Message{msg}, Extra: map[string]any{UploadedFilesKey: files}}, nil
}

// isStagingName reports upload staging names (partial uploads never shown to the model).
func isStagingName(name string) bool {
	return strings.HasPrefix(name, ".upload-") || strings.HasSuffix(name, ".partial") || strings.HasSuffix(name, ".uploading")
}

// filesFromKwargs validates additional_kwargs.files: bare, non-staging names that exist
// under uploadsDir (existence not checked when the dir is unknown); size coerced to int.
func filesFromKwargs(kw map[string]any, uploadsDir string) []UploadedFile {
	raw, ok := kw["files"].([]any)
	if !ok {
		if typed, ok2 := kw["files"].([]map[string]any); ok2 {
			for _, t := range typed {
				raw = append(raw, t)
			}
		}
	}
	var out []UploadedFile
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["filename"].(string)
		name = strings.TrimSpace(name)
		if name == "" || name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || name == "." || name == ".." || isStagingName(name) {
			continue
		}
		if uploadsDir != "" {
			if _, err := os.Stat(filepath.Join(uploadsDir, name)); err != nil {
				continue
			}
		}
		out = append(out, UploadedFile{Filename: name, Size: toInt64(m["size"]), Path: UploadsVirtualDir + "/" + name})
	}
	return out
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	case string:
		var i int64
		if _, err := fmt.Sscan(n, &i); err == nil {
			return i
		}
	}
	return 0
}

// neutraliseTags escapes angle brackets in user-derived strings so a file name cannot
// forge framework tags.
func neutraliseTags(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

// formatSize is DeerFlow's human size: bytes, "2.0 KB", "2.0 MB".
func formatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func uploadsBlock(files []UploadedFile, uploadsDir string) string {
	var b strings.Builder
	b.WriteString("<current_uploads>\nThe user uploaded the following file(s) with this message:\n")
	shown := files
	if len(shown) > MaxUploadsPerSection {
		shown = files[:MaxUploadsPerSection]
	}
	for _, f := range shown {
		size := formatSize(f.Size)
		if f.Size == 0 {
			size = "(empty)"
		}
		fmt.Fprintf(&b, "- %s (%s) at %s\n", neutraliseTags(f.Filename), size, neutraliseTags(f.Path))
		if uploadsDir != "" {
			if outline := fileOutline(filepath.Join(uploadsDir, f.Filename)); outline != "" {
				b.WriteString(outline)
			}
		}
	}
	if rest := files[len(shown):]; len(rest) > 0 {
		fmt.Fprintf(&b, "... (%d more file(s) from this message omitted from this context.)", len(rest))
		byExt := map[string]int{}
		for _, f := range rest {
			ext := strings.ToLower(filepath.Ext(f.Filename))
			if ext == "" {
				ext = "(no extension)"
			}
			byExt[ext]++
		}
		parts := make([]string, 0, len(byExt))
		for _, ext := range slices.Sorted(maps.Keys(byExt)) {
			parts = append(parts, fmt.Sprintf("%s: %d", neutraliseTags(ext), byExt[ext]))
		}
		b.WriteString(" Omitted by type: " + strings.Join(parts, ", ") + "\n")
	}
	b.WriteString("Use read_file on these paths to read the files.\n</current_uploads>")
	return b.String()
}

// fileOutline is the outline of a sibling converted .md (its headings), else a preview of
// the first non-empty lines of the file itself.
func fileOutline(path string) string {
	md := strings.TrimSuffix(path, filepath.Ext(path)) + ".md"
	if md != path {
		if lines := scanLines(md, 200, func(l string) bool { return strings.HasPrefix(l, "#") }); len(lines) > 0 {
			if len(lines) > 10 {
				lines = lines[:10]
			}
			return "  outline:\n" + indent(lines)
		}
	}
	lines := scanLines(path, 200, func(l string) bool { return strings.TrimSpace(l) != "" })
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > uploadPreviewLines {
		lines = lines[:uploadPreviewLines]
	}
	return "  preview:\n" + indent(lines)
}

func scanLines(path string, maxLines int, keep func(string) bool) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for n := 0; sc.Scan() && n < maxLines; n++ {
		if l := sc.Text(); keep(l) {
			out = append(out, clipRunes(l, 200))
		}
	}
	return out
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    " + neutraliseTags(l) + "\n")
	}
	return b.String()
}
