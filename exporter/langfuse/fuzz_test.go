package langfuse

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/faultsuite/configfuzz"
)

// Langfuse's error bodies (JSON with message/error, or anything a proxy answers): the
// message is bounded, stays UTF-8 when the body is, and never panics.
func FuzzServerMessage(f *testing.F) {
	f.Add(400, `{"message":"Invalid request data","error":[{"path":["spans"]}]}`)
	f.Add(401, `{"error":"Unauthorized"}`)
	f.Add(413, `<html>413 Request Entity Too Large</html>`)
	f.Add(500, `{"message":""}`)
	f.Add(503, "")
	f.Add(429, `{"error":"rate limited","message":null}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		resp := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
		msg := serverMessage(resp)
		if len(msg) > maxServerMessage+len("…") {
			t.Fatalf("message of %d bytes, bound %d", len(msg), maxServerMessage)
		}
		if utf8.ValidString(body) && !utf8.ValidString(msg) {
			t.Fatalf("message %q of a UTF-8 body is not UTF-8", msg)
		}
	})
}

// The exporter's config section, loaded as the collector loads it: no panic, and no
// error quotes the keys.
func FuzzConfigUnmarshal(f *testing.F) {
	f.Add([]byte("endpoint: https://langfuse.example.com\npublic_key: pk-lf-fuzzseed\nsecret_key: sk-lf-fuzzseed-secret\ncompression: gzip\n"))
	f.Add([]byte("enabled: true\nsecret_key: sk-lf-only-secret-value\n"))
	f.Add([]byte("endpoint: \"ftp//nowhere\"\npublic_key: pk\nsecret_key: sk-lf-another-secret\ncompression: zstd\ntimeout: -1s\n"))
	f.Add([]byte("sending_queue: {queue_size: -5, storage: file_storage}\nretry_on_failure: {max_interval: nope}\n"))
	f.Add([]byte("headers: {Authorization: Basic c2VjcmV0c2VjcmV0}\n"))
	f.Fuzz(func(t *testing.T, yaml []byte) {
		_, _ = configfuzz.Check(t, NewFactory(), yaml, func(c component.Config) []string {
			cfg := c.(*Config)
			out := []string{string(cfg.SecretKey)}
			for _, v := range cfg.Headers.Iter {
				out = append(out, string(v))
			}
			return out
		})
	})
}
