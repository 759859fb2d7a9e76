package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// UploadsVirtualDir is where the model and the sandbox tools see a thread's uploads
// (DeerFlow's virtual path).
const UploadsVirtualDir = "/mnt/user-data/uploads"

// maxUploadName bounds an uploaded file's name.
const maxUploadName = 255

// fileRef names a file already in the thread's uploads (JSON run requests).
type fileRef struct {
	Filename string `json:"filename"`
}

// UploadedFile is a stored upload as the API reports it.
type UploadedFile struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Path     string `json:"path"`
}

func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// validUploadName accepts bare file names: no folders, no "." or "..", no control
// characters, not an upload staging name (those are never shown to the model).
func validUploadName(name string) error {
	switch {
	case name == "" || strings.TrimSpace(name) != name:
		return errors.New("a file name must be non-empty without surrounding spaces")
	case len(name) > maxUploadName:
		return fmt.Errorf("a file name is at most %d bytes", maxUploadName)
	case name == "." || name == ".." || strings.ContainsAny(name, `/\`) || filepath.Base(name) != name:
		return fmt.Errorf("file name %q must be a bare name (no folders)", name)
	case strings.HasPrefix(name, ".upload-") || strings.HasSuffix(name, ".partial") || strings.HasSuffix(name, ".uploading"):
		return fmt.Errorf("file name %q is reserved for uploads in progress", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("file name %q has a control character", name)
		}
	}
	return nil
}

// parseMultipart reads a multipart body bounded by max_upload_bytes: its text fields and
// file parts (field "files"). It writes the error response and returns false on failure.
func (s *Server) parseMultipart(w http.ResponseWriter, r *http.Request) (*multipart.Form, bool) {
	limit := s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, "request body is %d bytes; the limit is %d (gateway.max_upload_bytes)", r.ContentLength, limit)
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseMultipartForm(4 << 20); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes (gateway.max_upload_bytes)", limit)
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "invalid multipart body: %v", err)
		return nil, false
	}
	for name := range r.MultipartForm.File {
		if name != "files" {
			_ = r.MultipartForm.RemoveAll()
			writeError(w, http.StatusBadRequest, "unknown file field %q: send files as \"files\"", name)
			return nil, false
		}
	}
	for _, fh := range r.MultipartForm.File["files"] {
		if err := validUploadName(fh.Filename); err != nil {
			_ = r.MultipartForm.RemoveAll()
			writeError(w, http.StatusBadRequest, "files: %v", err)
			return nil, false
		}
	}
	return r.MultipartForm, true
}

// uploadsDir is the thread's uploads folder, or an error when uploads are not configured.
func (s *Server) uploadsDir(userID, threadID string) (string, error) {
	if s.uploads == nil {
		return "", errors.New("uploads are not configured on this gateway")
	}
	return s.uploads(userID, threadID)
}

// storeUploads writes the file parts into the thread's uploads: each to a staging name
// first, renamed when complete, so a half-written file is never visible.
func (s *Server) storeUploads(userID, threadID string, parts []*multipart.FileHeader) ([]UploadedFile, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	dir, err := s.uploadsDir(userID, threadID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the uploads folder: %w", err)
	}
	var out []UploadedFile
	for _, fh := range parts {
		n, err := writeUpload(dir, fh)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", fh.Filename, err)
		}
		out = append(out, UploadedFile{Filename: fh.Filename, Size: n, Path: UploadsVirtualDir + "/" + fh.Filename})
	}
	return out, nil
}

func writeUpload(dir string, fh *multipart.FileHeader) (int64, error) {
	src, err := fh.Open()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	var b [8]byte
	_, _ = rand.Read(b[:])
	staging := filepath.Join(dir, ".upload-"+hex.EncodeToString(b[:]))
	dst, err := os.OpenFile(staging, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(staging, filepath.Join(dir, fh.Filename))
	}
	if err != nil {
		_ = os.Remove(staging)
		return 0, err
	}
	return n, nil
}

// referencedUploads checks that files named by a JSON run request are in the thread's
// uploads and returns them with their sizes.
func (s *Server) referencedUploads(userID, threadID string, refs []fileRef) ([]UploadedFile, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	dir, err := s.uploadsDir(userID, threadID)
	if err != nil {
		return nil, err
	}
	var out []UploadedFile
	for i, ref := range refs {
		if err := validUploadName(ref.Filename); err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		fi, err := os.Stat(filepath.Join(dir, ref.Filename))
		if err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("files[%d]: %q is not an upload of this thread (POST /api/threads/%s/uploads first)", i, ref.Filename, threadID)
		}
		out = append(out, UploadedFile{Filename: ref.Filename, Size: fi.Size(), Path: UploadsVirtualDir + "/" + ref.Filename})
	}
	return out, nil
}

// filesKwarg is the human message's additional_kwargs.files (DeerFlow's shape, read by
// UploadsMiddleware).
func filesKwarg(files []UploadedFile) []any {
	out := make([]any, 0, len(files))
	for _, f := range files {
		out = append(out, map[string]any{"filename": f.Filename, "size": f.Size, "path": f.Path})
	}
	return out
}

// runSandbox is the run's sandbox with the thread's uploads mounted at
// /mnt/user-data/uploads, so the file tools and the shell read what the model is told.
func (s *Server) runSandbox(sb sandbox.Sandbox, userID, threadID string) (sandbox.Sandbox, error) {
	if sb == nil || s.uploads == nil {
		return sb, nil
	}
	dir, err := s.uploads(userID, threadID)
	if err != nil {
		return nil, err
	}
	return sandbox.WithMounts(sb, map[string]string{UploadsVirtualDir: dir})
}

type uploadResponse struct {
	ThreadID string         `json:"thread_id"`
	Files    []UploadedFile `json:"files"`
}

// uploadFiles stores files in the thread's uploads (POST /api/threads/{id}/uploads,
// multipart field "files"); a run names them later in its "files". An unknown thread is
// created, owned by the caller.
func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request, p Principal) {
	threadID := r.PathValue("thread_id")
	if s.uploads == nil {
		writeError(w, http.StatusNotImplemented, "uploads are not configured on this gateway")
		return
	}
	if !isMultipart(r) {
		writeError(w, http.StatusBadRequest, "uploads are multipart/form-data with the files in field \"files\"")
		return
	}
	form, ok := s.parseMultipart(w, r)
	if !ok {
		return
	}
	defer form.RemoveAll() //nolint:errcheck // temp files of the parsed body
	if len(form.File["files"]) == 0 {
		writeError(w, http.StatusBadRequest, "no files: send them in the multipart field \"files\"")
		return
	}
	if !s.ensureThread(w, r, p, threadID) {
		return
	}
	files, err := s.storeUploads(p.UserID, threadID, form.File["files"])
	if err != nil {
		s.internalError(w, "store uploads", err)
		return
	}
	writeJSON(w, http.StatusCreated, uploadResponse{ThreadID: threadID, Files: files})
}

// ensureThread applies the owner check and creates an unknown thread owned by the
// caller; it writes the error response and returns false when the request must stop.
func (s *Server) ensureThread(w http.ResponseWriter, r *http.Request, p Principal, threadID string) bool {
	_, exists, ok := s.checkOwner(w, r, p, threadID)
	if !ok {
		return false
	}
	if exists {
		return true
	}
	err := s.store.CreateThread(r.Context(), store.Thread{ID: threadID, UserID: p.UserID, CreatedAt: time.Now().UTC()})
	if errors.Is(err, store.ErrExists) {
		_, _, ok := s.checkOwner(w, r, p, threadID) // created concurrently: check again
		return ok
	}
	if err != nil {
		s.internalError(w, "create thread", err)
		return false
	}
	return true
}
