package middleware

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// ViewImage constants (DeerFlow's ViewImageMiddleware).
const (
	ViewImageIDPrefix    = "view-image-context:"
	KwargViewImageMarker = "deerflow_view_image_context"
	ViewImageHeader      = "Here are the images you've viewed:"
	// KwargContentBlocks carries multimodal blocks ({type:text}/{type:image_url}) of a
	// message whose Content is the text part (runtime messages have string content).
	KwargContentBlocks  = "content_blocks"
	maxViewImageB64Size = 20 << 20 * 4 / 3
	viewedImagesKey     = "viewed_images"
)

// ViewImageMiddleware (vision models only) shows images loaded by view_image to the model:
// before_model injects one hidden HumanMessage with the images after the view_image tool
// run completed; after_model removes it again, so the base64 data never stays in the
// checkpointed history.
type ViewImageMiddleware struct{}

// NewViewImageMiddleware returns the middleware.
func NewViewImageMiddleware() *ViewImageMiddleware { return &ViewImageMiddleware{} }

// Name implements agent.Middleware.
func (*ViewImageMiddleware) Name() string { return NameViewImage }

func isImageContext(m message.Message) bool {
	return m.IsHuman() && kwargBool(m, KwargViewImageMarker) && strings.HasPrefix(m.ID, ViewImageIDPrefix)
}

// ShouldInjectImages: the last AI message called view_image, every one of its calls has
// a ToolMessage after it, and no image-context message follows it yet.
func ShouldInjectImages(msgs []message.Message) (int, bool) {
	ai := message.LastAI(msgs)
	if ai < 0 {
		return -1, false
	}
	called := false
	pending := map[string]bool{}
	for _, c := range msgs[ai].ToolCalls {
		pending[c.ID] = true
		if c.Name == "view_image" {
			called = true
		}
	}
	if !called {
		return -1, false
	}
	for _, m := range msgs[ai+1:] {
		if isImageContext(m) {
			return -1, false
		}
		if m.IsTool() {
			delete(pending, m.ToolCallID)
		}
	}
	return ai, len(pending) == 0
}

// BeforeModel implements agent.BeforeModelHook.
func (*ViewImageMiddleware) BeforeModel(_ context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	ai, ok := ShouldInjectImages(st.Messages)
	if !ok {
		return nil, nil
	}
	viewed, _ := st.Extra[viewedImagesKey].(map[string]any)
	text := []string{ViewImageHeader}
	blocks := []any{map[string]any{"type": "text", "text": ViewImageHeader}}
	if len(viewed) == 0 {
		text = append(text, "No images have been viewed.")
		blocks = append(blocks, map[string]any{"type": "text", "text": "No images have been viewed."})
	}
	paths := slices.Sorted(maps.Keys(viewed))
	for _, p := range paths {
		img, _ := viewed[p].(map[string]any)
		b64, _ := img["base64"].(string)
		mime, _ := img["mime_type"].(string)
		if b64 == "" || len(b64) > maxViewImageB64Size {
			line := fmt.Sprintf("- %s (image unavailable: missing or larger than 20 MiB)", neutraliseTags(p))
			text = append(text, line)
			blocks = append(blocks, map[string]any{"type": "text", "text": line})
			continue
		}
		if mime == "" {
			mime = "application/octet-stream"
		}
		line := fmt.Sprintf("- %s (%s)", neutraliseTags(p), mime)
		text = append(text, line)
		blocks = append(blocks, map[string]any{"type": "text", "text": line},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:" + mime + ";base64," + b64}})
	}
	msg := hiddenHuman(ViewImageIDPrefix+st.Messages[ai].ID, "", strings.Join(text, "\n"))
	msg.AdditionalKwargs[KwargViewImageMarker] = true
	msg.AdditionalKwargs[KwargContentBlocks] = blocks
	return &state.Update{Messages: []message.Message{msg}}, nil
}

// AfterModel removes every injected image-context message.
func (*ViewImageMiddleware) AfterModel(_ context.Context, _ *agent.Runtime, st *state.State) (*state.Update, error) {
	var ids []string
	for _, m := range st.Messages {
		if isImageContext(m) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return &state.Update{RemoveMessageIDs: ids}, nil
}
