// Package vendorhttp is what the two vendor exporters (langfuse, langsmith) do the same
// way: classify an HTTP answer into the collector's error semantics (delivered,
// permanent, retryable, throttled), extract the server's message, explain rejected
// credentials, report network errors without the endpoint, split a request the server
// refused as too large and retry only what failed, compress bodies with pooled encoders,
// size the default sending queue and bound the wait for room in it, keep older versions of
// a re-emitted span from going out over newer ones (Revisions), and stand in for a
// disabled exporter. The rules are those of docs/contract.md#exporters.
package vendorhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/agentmeter/agentmeter/internal/retryafter"
)

// Bounds on what is read from an answer.
const (
	// MaxResponseRead is how much of an answer's body is read (for its message) or
	// drained (so the connection can be reused).
	MaxResponseRead = 64 << 10
	// MaxServerMessage bounds a server message quoted in an error or a log line.
	MaxServerMessage = 512
)

// ErrTooLarge marks a 413: the body is over the server's real limit. The same body cannot
// succeed, so it is permanent for that request; Splitter sends the items again in halves.
var ErrTooLarge = errors.New("request body too large (HTTP 413)")

// ErrCredentials marks an answer that says the credentials are wrong (401, 403).
var ErrCredentials = errors.New("credentials rejected")

// Vendor describes one vendor API for the shared rules.
type Vendor struct {
	// Name starts error messages: "langfuse", "LangSmith".
	Name string
	// CredentialHint says which settings to check after a 401 or 403 (status).
	CredentialHint func(status int) string
	// Delivered reports non-2xx statuses that still mean delivered (LangSmith's 409: a
	// run with this id exists, so an earlier attempt got through). Nil: 2xx only.
	Delivered func(status int) bool
}

// Retryable reports the statuses both exporters retry, as the vendors' own SDKs do:
// 408, 425, 429 and 5xx.
func Retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooEarly ||
		code == http.StatusTooManyRequests || code/100 == 5
}

// Classify turns an answer to a request (what, e.g. "POST /runs/multipart", or "") into the
// collector's error semantics: nil when delivered; an error wrapping ErrTooLarge on 413;
// a permanent credential error on 401/403; a retryable error on Retryable statuses,
// throttled by Retry-After when the server sent one; permanent otherwise. Every error
// quotes the server's message and never the URL.
func (v Vendor) Classify(resp *http.Response, what string) error {
	code := resp.StatusCode
	if code/100 == 2 || (v.Delivered != nil && v.Delivered(code)) {
		return nil
	}
	msg := ServerMessage(resp)
	prefix := v.Name
	if what != "" {
		prefix += ": " + what
	}
	switch {
	case code == http.StatusRequestEntityTooLarge:
		return consumererror.NewPermanent(fmt.Errorf("%s: %w: %s", prefix, ErrTooLarge, msg))
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return consumererror.NewPermanent(v.CredentialError(code, what, msg))
	case Retryable(code):
		err := fmt.Errorf("%s: HTTP %d: %s", prefix, code, msg)
		if d, ok := retryafter.Parse(resp.Header.Get("Retry-After"), time.Now()); ok {
			return exporterhelper.NewThrottleRetry(err, d)
		}
		return err
	default:
		return consumererror.NewPermanent(fmt.Errorf("%s: HTTP %d: %s", prefix, code, msg))
	}
}

// credentialError reads as the vendor's explanation and unwraps to ErrCredentials.
type credentialError struct{ msg string }

func (e *credentialError) Error() string { return e.msg }
func (e *credentialError) Unwrap() error { return ErrCredentials }

// CredentialError explains a 401/403 to what in terms of the settings a user can change
// (the vendor's CredentialHint). It never carries a key.
func (v Vendor) CredentialError(status int, what, msg string) error {
	where := ""
	if what != "" {
		where = " on " + what
	}
	hint := "check the credentials"
	if v.CredentialHint != nil {
		hint = v.CredentialHint(status)
	}
	return &credentialError{fmt.Sprintf("%s rejected the credentials (HTTP %d%s): %s; %s", v.Name, status, where, msg, hint)}
}

// NetworkError reports a failed request (no answer) as retryable, without the URL the
// http package puts in its errors: an endpoint may carry credentials.
func (v Vendor) NetworkError(err error, what string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if what == "" {
		return fmt.Errorf("%s: %w", v.Name, err)
	}
	return fmt.Errorf("%s: %s: %w", v.Name, what, err)
}

// ServerMessage extracts the server's explanation from an error answer: the "detail",
// "message" or "error" of a JSON body (a non-string value as its JSON), else the body's
// text, else the status text, cut to at most MaxServerMessage bytes of valid UTF-8.
func ServerMessage(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	text := strings.TrimSpace(string(raw))
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) == nil {
		for _, k := range []string{"detail", "message", "error"} {
			v, ok := body[k]
			if !ok || len(v) == 0 || string(v) == "null" {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) == nil {
				if s == "" {
					continue
				}
				text = s
			} else {
				text = string(v)
			}
			break
		}
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	if len(text) > MaxServerMessage {
		// no character cut in two: what is quoted stays valid UTF-8 in logs
		text = strings.ToValidUTF8(text[:MaxServerMessage], "") + "…"
	}
	return text
}

// Drain reads what is left of a body (bounded) and closes it, so the connection is reused.
func Drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseRead))
	_ = resp.Body.Close()
}

// ValidateEndpoint checks a vendor base URL. Its messages never echo the URL: one with
// user info would carry a secret.
func ValidateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("endpoint must be set")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return errors.New("endpoint must be a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return errors.New("endpoint must be an http or https URL")
		}
		return fmt.Errorf("endpoint must be an http or https URL, not scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("endpoint must name a host")
	}
	if u.User != nil {
		return errors.New("endpoint must not carry credentials; set them in their own settings")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("endpoint must be a base URL without query or fragment")
	}
	return nil
}
