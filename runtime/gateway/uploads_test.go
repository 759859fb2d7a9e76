package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// multipartBody builds a multipart body with text fields and files (name → content).
func multipartBody(t *testing.T, fields map[string]string, files map[string]string) (string, *bytes.Buffer) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		fw, err := mw.CreateFormFile("files", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(fw, content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}

func (e *env) postMultipart(t *testing.T, path, key, contentType string, body io.Reader) (int, string) {
	t.Helper()
	return e.send(t, "POST", path, key, contentType, body)
}

// checkUploadRun: the run succeeded, the human message names the file, and both tools
// read the upload through /mnt/user-data/uploads.
func checkUploadRun(t *testing.T, e *threadEnv, thread string, run store.Run) {
	t.Helper()
	if run.Status != store.StatusSuccess {
		t.Fatalf("run = %+v", run)
	}
	var st threadStateResponse
	if err := json.Unmarshal([]byte(e.expect(t, "GET", "/api/threads/"+thread+"/state", "alice-key", "", 200, "")), &st); err != nil {
		t.Fatal(err)
	}
	msgs := st.Values.Messages
	files, _ := msgs[0].AdditionalKwargs["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["filename"] != "notes.txt" || files[0].(map[string]any)["path"] != "/mnt/user-data/uploads/notes.txt" || files[0].(map[string]any)["size"] != 15.0 {
		t.Fatalf("human message files = %#v", msgs[0].AdditionalKwargs)
	}
	var tools []message.Message
	for _, m := range msgs {
		if m.IsTool() {
			tools = append(tools, m)
		}
	}
	if len(tools) != 2 || !strings.Contains(tools[0].Content, "hello from file") || tools[0].Status == message.ToolError ||
		!strings.Contains(tools[1].Content, "15") {
		t.Fatalf("tool results = %+v", tools)
	}
}

func TestUploadOnTheRunRequest(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	ct, body := multipartBody(t, map[string]string{"input": "Read what I uploaded"}, map[string]string{"notes.txt": "hello from file"})
	code, out := e.postMultipart(t, "/api/threads/t1/runs?wait=true", "alice-key", ct, body)
	if code != 200 {
		t.Fatalf("multipart run: %d %s", code, out)
	}
	checkUploadRun(t, e, "t1", decodeRun(t, out))
}

func TestUploadThenReference(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	ct, body := multipartBody(t, nil, map[string]string{"notes.txt": "hello from file"})
	code, out := e.postMultipart(t, "/api/threads/t2/uploads", "alice-key", ct, body)
	if code != 201 || strings.TrimSpace(out) != `{"thread_id":"t2","files":[{"filename":"notes.txt","size":15,"path":"/mnt/user-data/uploads/notes.txt"}]}` {
		t.Fatalf("upload: %d %s", code, out)
	}
	run := decodeRun(t, e.expect(t, "POST", "/api/threads/t2/runs?wait=true", "alice-key", `{"input":"Read what I uploaded","files":[{"filename":"notes.txt"}]}`, 200, ""))
	checkUploadRun(t, e, "t2", run)
	// A name that is not an upload of this thread, or not a bare name, is refused.
	e.expect(t, "POST", "/api/threads/t2/runs", "alice-key", `{"input":"x","files":[{"filename":"missing.txt"}]}`, 400,
		detail(`files[0]: "missing.txt" is not an upload of this thread (POST /api/threads/t2/uploads first)`))
	e.expect(t, "POST", "/api/threads/t2/runs", "alice-key", `{"input":"x","files":[{"filename":"../../etc/passwd"}]}`, 400,
		detail(`files[0]: file name "../../etc/passwd" must be a bare name (no folders)`))
	// Another user's thread is 404; their uploads are elsewhere.
	ct, body = multipartBody(t, nil, map[string]string{"evil.txt": "x"})
	if code, out := e.postMultipart(t, "/api/threads/t2/uploads", "bob-key", ct, body); code != 404 {
		t.Fatalf("bob uploads to alice's thread: %d %s", code, out)
	}
	ct, body = multipartBody(t, nil, map[string]string{".upload-x": "x"})
	if code, out := e.postMultipart(t, "/api/threads/t2/uploads", "alice-key", ct, body); code != 400 || !strings.Contains(out, "reserved") {
		t.Fatalf("staging name: %d %s", code, out)
	}
}

func TestRejectedRunStoresNoUpload(t *testing.T) {
	e := newThreadEnv(t, Config{}, nil)
	first := decodeRun(t, e.expect(t, "POST", "/api/threads/t1/runs", "alice-key", `{"input":"remember blue"}`, 202, ""))
	ct, body := multipartBody(t, map[string]string{"input": "Read what I uploaded"}, map[string]string{"late.txt": "x"})
	if code, out := e.postMultipart(t, "/api/threads/t1/runs", "alice-key", ct, body); code != 409 {
		t.Fatalf("multipart run on a busy thread: %d %s", code, out)
	}
	dir, _ := e.srv.uploads("alice", "t1")
	if _, err := os.Stat(filepath.Join(dir, "late.txt")); !os.IsNotExist(err) {
		t.Fatalf("a rejected run's file was stored: %v", err)
	}
	waitIdle(t, e.srv, "t1")
	if r, _ := e.store.GetRun(context.Background(), first.RunID); r.Status != store.StatusSuccess {
		t.Fatalf("first run = %+v", r)
	}
}

func TestUploadsLimitAndNotConfigured(t *testing.T) {
	e := newThreadEnv(t, Config{MaxUploadBytes: 512}, nil)
	ct, body := multipartBody(t, map[string]string{"input": "x"}, map[string]string{"big.txt": strings.Repeat("x", 2048)})
	if code, out := e.postMultipart(t, "/api/threads/t1/runs", "alice-key", ct, body); code != 413 || !strings.Contains(out, "gateway.max_upload_bytes") {
		t.Fatalf("oversized multipart: %d %s", code, out)
	}
	plain := authEnv(t) // no Uploads function
	ct, body = multipartBody(t, map[string]string{"input": "x"}, map[string]string{"a.txt": "x"})
	if code, out := plain.postMultipart(t, "/api/threads/t1/runs", "alice-key", ct, body); code != 501 {
		t.Fatalf("uploads not configured: %d %s", code, out)
	}
}
