package agentusage

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/faultsuite/configfuzz"
)

// The receiver's config section, loaded as the collector loads it: no panic, and no
// error quotes an API key.
func FuzzConfigUnmarshal(f *testing.F) {
	f.Add([]byte("endpoint: 127.0.0.1:5319\nmax_request_body_size: 1048576\napi_keys: [key-one-secret, \"pk-lf-1:sk-lf-1-secret\"]\npending_timeout: 30s\nmax_pending: 100\nretry_after: 3s\n"))
	f.Add([]byte("api_keys: [\"\", key-after-an-empty-one]\n"))
	f.Add([]byte("max_pending: -1\npending_timeout: -1s\nretry_after: nope\n"))
	f.Add([]byte("endpoint: \"\"\ntls: {cert_file: /nope}\n"))
	f.Fuzz(func(t *testing.T, yaml []byte) {
		_, _ = configfuzz.Check(t, NewFactory(), yaml, func(c component.Config) []string {
			var out []string
			for _, k := range c.(*Config).APIKeys {
				out = append(out, string(k))
			}
			return out
		})
	})
}
