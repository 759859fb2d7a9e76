// Package providertest is the fake model API the provider tests talk to: it answers one
// path with the test's handler and records what each request sent.
package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Server answers Path with Handler (other paths get 404) and records each request's JSON
// body and Authorization header. Safe for concurrent requests.
type Server struct {
	Path    string
	Handler func(w http.ResponseWriter, body map[string]any)

	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
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
	s.bodies = append(s.bodies, body)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	s.Handler(w, body)
}

// Bodies are the JSON bodies received, in order.
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// Auth are the Authorization headers received, in order.
func (s *Server) Auth() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// Requests is how many requests reached Path.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}
