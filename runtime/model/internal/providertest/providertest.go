// Package providertest is the fake model API the provider tests talk to: it answers one
// path with the test's handler and records what each request sent.
package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Request is what one request sent.
type Request struct {
	Body map[string]any // the JSON body
	Auth string         // the Authorization header
}

// Server answers Path with Handler (other paths get 404) and records each request.
// Safe for concurrent requests.
type Server struct {
	Path    string
	Handler func(w http.ResponseWriter, body map[string]any)

	mu       sync.Mutex
	requests []Request
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.Path {
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Body: body, Auth: r.Header.Get("Authorization")})
	s.mu.Unlock()
	s.Handler(w, body)
}

// Requests are the requests that reached Path, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}
