package tool

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/state"
)

// SearchResult is one web search hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// SearchProvider is the backend of web_search (Tavily, a search API, or a fixture in
// tests). Implementations must honour ctx and be safe for concurrent use.
type SearchProvider interface {
	Search(ctx context.Context, query string, maxResults int) ([]SearchResult, error)
}

// WebSearch is DeerFlow's web_search over a SearchProvider.
type WebSearch struct {
	Provider   SearchProvider
	MaxResults int // default 5
}

func (WebSearch) Spec() Spec {
	return Spec{
		Name:        "web_search",
		Description: "Search the web. Returns titles, URLs and snippets.",
		Parameters: object([]string{"query"}, map[string]any{
			"query": strProp("search query"), "max_results": map[string]any{"type": "integer", "minimum": 1.0},
		}),
	}
}

// ErrNoSearchProvider is returned when web_search has no provider.
var ErrNoSearchProvider = errors.New("web search is not configured")

func (w WebSearch) Call(ctx context.Context, call Call) (Result, error) {
	if w.Provider == nil {
		return Result{}, ErrNoSearchProvider
	}
	n := w.MaxResults
	if n <= 0 {
		n = 5
	}
	if m, ok := intArg(call.Args, "max_results"); ok && m < n {
		n = m
	}
	query := strings.TrimSpace(str(call.Args, "query"))
	if query == "" {
		return Result{}, &ArgError{Tool: "web_search", Field: "query", Reason: "must not be empty"}
	}
	res, err := w.Provider.Search(ctx, query, n)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	if len(res) > n {
		res = res[:n]
	}
	var b strings.Builder
	for i, r := range res {
		fmt.Fprintf(&b, "%d. %s\n   %s\n   %s\n", i+1, r.Title, r.URL, r.Snippet)
	}
	if b.Len() == 0 {
		return Result{Content: "No results."}, nil
	}
	return Result{Content: b.String()}, nil
}

// MaxImageBytes bounds view_image.
const MaxImageBytes = 8 << 20

// ViewImage is DeerFlow's view_image: it loads an image of the workspace into the
// viewed_images state channel (the ViewImageMiddleware injects it into the next model call
// of vision models).
type ViewImage struct{}

func (ViewImage) Spec() Spec {
	return Spec{
		Name:        "view_image",
		Description: "Look at an image file of the workspace (png, jpeg, gif, webp).",
		Parameters:  object([]string{"image_path"}, map[string]any{"image_path": strProp("image file path")}),
	}
}

// ViewedImagesKey is the state.Extra channel of viewed images: map path → {base64, mime_type}.
const ViewedImagesKey = "viewed_images"

func (ViewImage) Call(_ context.Context, call Call) (Result, error) {
	sb, err := sandboxOf(call)
	if err != nil {
		return Result{}, err
	}
	path := str(call.Args, "image_path")
	p, err := sb.Resolve(path)
	if err != nil {
		return errorf("%v", err), nil
	}
	data, err := readLimited(p, MaxImageBytes)
	if err != nil {
		return errorf("%v", stripRoot(err, sb.Root())), nil
	}
	mime := http.DetectContentType(data)
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return errorf("%s is not a supported image (detected %s)", path, mime), nil
	}
	viewed := map[string]any{}
	if call.Env != nil && call.Env.State != nil {
		if prev, ok := call.Env.State.Extra[ViewedImagesKey].(map[string]any); ok {
			for k, v := range prev {
				viewed[k] = v
			}
		}
	}
	viewed[path] = map[string]any{"base64": base64.StdEncoding.EncodeToString(data), "mime_type": mime}
	return Result{Content: "Successfully read image", Update: &state.Update{Extra: map[string]any{ViewedImagesKey: viewed}}}, nil
}

// PresentFiles is DeerFlow's present_files: it makes workspace files visible to the user
// as artifacts.
type PresentFiles struct{}

func (PresentFiles) Spec() Spec {
	return Spec{
		Name:        "present_files",
		Description: "Present files of the workspace to the user as artifacts.",
		Parameters: object([]string{"filepaths"}, map[string]any{
			"filepaths": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		}),
	}
}

func (PresentFiles) Call(_ context.Context, call Call) (Result, error) {
	sb, err := sandboxOf(call)
	if err != nil {
		return Result{}, err
	}
	raw, _ := call.Args["filepaths"].([]any)
	if len(raw) == 0 {
		return Result{}, &ArgError{Tool: "present_files", Field: "filepaths", Reason: "must not be empty"}
	}
	var arts []string
	for _, r := range raw {
		path, _ := r.(string)
		p, err := sb.Resolve(path)
		if err != nil {
			return errorf("%v", err), nil
		}
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			return errorf("%s is not a file of the workspace", path), nil
		}
		rel, _ := filepath.Rel(sb.Root(), p)
		arts = append(arts, "/workspace/"+filepath.ToSlash(rel))
	}
	return Result{Content: "Successfully presented files", Update: &state.Update{Artifacts: arts}}, nil
}

// Builtins returns the built-in tools (without task, which runtime/subagent provides),
// configured with a sandbox bash timeout and an optional search provider.
func Builtins(bash Bash, search SearchProvider) []Tool {
	return []Tool{WriteTodos{}, AskClarification{}, bash, Ls{}, ReadFile{}, WriteFile{}, StrReplace{},
		WebSearch{Provider: search}, ViewImage{}, PresentFiles{}}
}
