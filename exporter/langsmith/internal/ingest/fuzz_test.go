package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"
)

// answer is a RoundTripper that answers every request with one status and body.
type answer struct {
	status int
	body   string
	header http.Header
}

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	h := a.header
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: a.status, Header: h, Body: io.NopCloser(strings.NewReader(a.body))}, nil
}

// /info bodies from any deployment (or a proxy in front of it): no panic, and the limits
// the exporter will split by are always usable.
func FuzzInfo(f *testing.F) {
	f.Add(200, `{"version":"0.8","batch_ingest_config":{"use_multipart_endpoint":true,"size_limit":100,"size_limit_bytes":20971520}}`)
	f.Add(200, `{"batch_ingest_config":{"size_limit":-1,"size_limit_bytes":0}}`)
	f.Add(200, `{"batch_ingest_config":{"size_limit":"many"}}`)
	f.Add(200, `{"batch_ingest_config":null}`)
	f.Add(200, `[]`)
	f.Add(404, `<html>not found</html>`)
	f.Add(200, `{"batch_ingest_config":{"size_limit":1e300}}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 100 || status > 999 {
			return
		}
		c, err := NewClient(&http.Client{Transport: answer{status: status, body: body}}, "http://langsmith.invalid", "lsv2_pt_fuzz_key", "", CompressionNone, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cfg, err := c.Info(context.Background())
		if cfg.Limits.MaxRuns <= 0 || cfg.Limits.MaxBytes <= 0 {
			t.Fatalf("unusable limits %+v (err %v)", cfg.Limits, err)
		}
		if err != nil && strings.Contains(err.Error(), "lsv2_pt_fuzz_key") {
			t.Fatal("the error quotes the API key")
		}
	})
}

// Ingest answers (status, error body, Retry-After): 2xx and 409 deliver, 401/403 are
// credential errors, the rest permanent or retryable as the official clients decide;
// the server's message is bounded; nothing panics.
func FuzzSendAnswer(f *testing.F) {
	f.Add(202, "", "")
	f.Add(409, `{"detail":"run already exists"}`, "")
	f.Add(401, `{"detail":"Invalid token"}`, "")
	f.Add(429, `{"detail":"rate limited"}`, "2")
	f.Add(503, `<html>bad gateway</html>`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(422, `{"detail":[{"loc":["body","post",0,"id"],"msg":"bad uuid"}]}`, "")
	f.Add(413, strings.Repeat("x", 5000), "")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		if status < 200 || status > 999 || status == http.StatusNotFound {
			return // 404 switches to /runs/batch: a different path, covered by tests
		}
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		c, err := NewClient(&http.Client{Transport: answer{status: status, body: body, header: h}}, "http://langsmith.invalid", "lsv2_pt_fuzz_key", "", CompressionNone, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.Send(context.Background(), nil)
		switch {
		case status/100 == 2 || status == http.StatusConflict:
			if err != nil {
				t.Fatalf("status %d: %v", status, err)
			}
			return
		case err == nil:
			t.Fatalf("status %d delivered", status)
		case status == 401 || status == 403:
			if !errors.Is(err, ErrCredentials) || !consumererror.IsPermanent(err) {
				t.Fatalf("status %d: %v", status, err)
			}
		case Retryable(status):
			if consumererror.IsPermanent(err) {
				t.Fatalf("status %d permanent: %v", status, err)
			}
		default:
			if !consumererror.IsPermanent(err) {
				t.Fatalf("status %d retryable: %v", status, err)
			}
		}
		if len(err.Error()) > 2048 {
			t.Fatalf("error of %d bytes: the server's message is not bounded", len(err.Error()))
		}
		if strings.Contains(err.Error(), "lsv2_pt_fuzz_key") {
			t.Fatal("the error quotes the API key")
		}
	})
}
