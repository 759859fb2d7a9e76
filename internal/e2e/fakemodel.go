//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/genai"
)

// FakeModel is a loopback OpenAI-compatible chat completions server for the interop
// tests: real agent frameworks and instrumentations call it through their own clients,
// and it records every usage block it served, so a test compares what the collector
// counted with what was actually served rather than with numbers written in the test.
//
// It answers POST /v1/chat/completions (and /chat/completions):
//   - when tools are offered, one of them is named "task" and the conversation holds no
//     tool result yet, with a call of the task tool (the lead agent dispatching a
//     subagent); otherwise with a text answer;
//   - non-streaming, or as server-sent events when "stream" is true, ending with a usage
//     chunk (choices empty) when stream_options.include_usage is set, as OpenAI does;
//   - usage with cached input tokens (prompt_tokens_details.cached_tokens) and reasoning
//     tokens (completion_tokens_details.reasoning_tokens), different for every call.
type FakeModel struct {
	URL string // http://127.0.0.1:<port>/v1, the base URL OpenAI clients take

	srv *http.Server
	mu  sync.Mutex
	log []ServedCall
}

// ServedCall is one answered request.
type ServedCall struct {
	Model      string
	Stream     bool
	Tools      bool   // tools were offered
	ToolCallID string // the task call it answered with, or ""
	// Usage is what the response carried; UsageSent is false for a stream without
	// include_usage (no usage left the server).
	Usage     genai.Usage
	UsageSent bool
	Subagent  bool // the request came from the subagent (see isSubagentRequest)
}

// StartFakeModel starts the server on a free loopback port; it stops at test cleanup.
func StartFakeModel(t testing.TB) *FakeModel {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake model listen: %v", err)
	}
	f := &FakeModel{URL: "http://" + l.Addr().String() + "/v1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", f.chat)
	mux.HandleFunc("/chat/completions", f.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("fake model: no route %s %s", r.Method, r.URL.Path), http.StatusNotFound)
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(func() { _ = f.srv.Close() })
	return f
}

// Calls returns every call served so far.
func (f *FakeModel) Calls() []ServedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ServedCall(nil), f.log...)
}

// Served sums the usage that left the server, over the calls keep selects (nil: all).
func (f *FakeModel) Served(keep func(ServedCall) bool) genai.Usage {
	var sum genai.Usage
	for _, c := range f.Calls() {
		if c.UsageSent && (keep == nil || keep(c)) {
			sum = sum.Add(c.Usage)
		}
	}
	return sum
}

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		Include bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []json.RawMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// SubagentMarker is the word the interop scripts put in a subagent's system prompt, so
// the fake can tell the subagent's calls from the lead's.
const SubagentMarker = "You are the researcher subagent"

func (f *FakeModel) chat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "fake model: POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "fake model: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "fake model: bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	offersTask, hasToolResult, subagent := false, false, strings.Contains(string(body), SubagentMarker)
	for _, tl := range req.Tools {
		if tl.Function.Name == "task" {
			offersTask = true
		}
	}
	for _, raw := range req.Messages {
		var m chatMessage
		if json.Unmarshal(raw, &m) == nil && m.Role == "tool" {
			hasToolResult = true
		}
	}

	f.mu.Lock()
	n := len(f.log) + 1
	call := ServedCall{Model: req.Model, Stream: req.Stream, Tools: len(req.Tools) > 0, Subagent: subagent}
	if offersTask && !hasToolResult {
		call.ToolCallID = fmt.Sprintf("call_task_%d", n)
	}
	// every call gets its own numbers so a lost or doubled call shows in the sums
	call.Usage = genai.Usage{
		Input:     int64(100*n + 7*len(req.Messages)),
		Output:    int64(10*n + 3),
		CacheRead: int64(32 * n),
		Reasoning: int64(2*n + 1),
	}
	call.UsageSent = !req.Stream || (req.StreamOptions != nil && req.StreamOptions.Include)
	f.log = append(f.log, call)
	f.mu.Unlock()

	id := fmt.Sprintf("chatcmpl-fake-%d", n)
	usage := map[string]any{
		"prompt_tokens":     call.Usage.Input,
		"completion_tokens": call.Usage.Output,
		"total_tokens":      call.Usage.Input + call.Usage.Output,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": call.Usage.CacheRead, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": call.Usage.Reasoning, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
	text := "The lead agent's answer, using the research."
	if subagent {
		text = "Research notes: the subagent's findings."
	}
	args := `{"description":"research the topic","prompt":"Find three facts.","subagent_type":"researcher"}`
	created := time.Now().Unix()

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
		finish := "stop"
		if call.ToolCallID != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{
				"id": call.ToolCallID, "type": "function",
				"function": map[string]any{"name": "task", "arguments": args},
			}}
			finish = "tool_calls"
		}
		writeJSON(w, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":              usage,
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(choices []any, u any) {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"system_fingerprint": "fp_fake", "choices": choices,
		}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}
	}
	var nullUsage any
	if req.StreamOptions != nil && req.StreamOptions.Include {
		nullUsage = json.RawMessage("null") // OpenAI sends usage:null on every chunk but the last
	}
	if call.ToolCallID != "" {
		chunk(delta(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": call.ToolCallID, "type": "function",
			"function": map[string]any{"name": "task", "arguments": ""},
		}}}, nil), nullUsage)
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": part},
			}}}, nil), nullUsage)
		}
		chunk(delta(map[string]any{}, "tool_calls"), nullUsage)
	} else {
		chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nullUsage)
		for _, word := range strings.SplitAfter(text, " ") {
			chunk(delta(map[string]any{"content": word}, nil), nullUsage)
		}
		chunk(delta(map[string]any{}, "stop"), nullUsage)
	}
	if call.UsageSent {
		chunk([]any{}, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
