package langsmith

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/agentmeter/agentmeter/internal/faultsuite/configfuzz"
)

// The exporter's config section, loaded as the collector loads it: no panic, and no
// error quotes the API key.
func FuzzConfigUnmarshal(f *testing.F) {
	f.Add([]byte("endpoint: https://langsmith.example.com/api/v1\napi_key: lsv2_pt_fuzzseed_secret\nproject: p\ntenant_id: 1f5d2c3e-0000-4000-8000-000000000001\n"))
	f.Add([]byte("enabled: true\napi_key: lsv2_pt_only_the_key\ncompression: snappy\nmax_cached_spans: -1\n"))
	f.Add([]byte("enabled: true\nendpoint: \"ftp//nowhere\"\nproject: \"\"\napi_key: lsv2_pt_key_in_a_bad_config\n"))
	f.Add([]byte("sending_queue: {num_consumers: 0}\nretry_on_failure: {initial_interval: -1s}\n"))
	f.Fuzz(func(t *testing.T, yaml []byte) {
		_, _ = configfuzz.Check(t, NewFactory(), yaml, func(c component.Config) []string {
			return []string{string(c.(*Config).APIKey)}
		})
	})
}
