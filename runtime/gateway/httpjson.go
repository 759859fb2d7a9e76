package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
)

// errorBody is DeerFlow's (FastAPI's) error shape.
type errorBody struct {
	Detail string `json:"detail"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, errorBody{Detail: fmt.Sprintf(format, args...)})
}

// idPattern is what thread and run ids may look like: no slashes, spaces or control
// characters, at most 128 characters (ids end up in URLs, logs and span attributes).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

func validID(id string) bool { return idPattern.MatchString(id) }

// decodeBody decodes one JSON object strictly into dst. It writes the error response
// (400 malformed, 413 too large) and returns false on failure. An empty body is allowed
// when allowEmpty (dst keeps its zero value).
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) bool {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, "request body is %d bytes; the limit is %d (gateway.max_body_bytes)", r.ContentLength, limit)
		return false
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if errors.Is(err, io.EOF) && allowEmpty {
		return true
	}
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		// Trailing garbage after the object is malformed too.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes (gateway.max_body_bytes)", limit)
			return false
		}
		if errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "request body is empty; expected a JSON object")
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid request body: %v", err)
		return false
	}
	return true
}
