package gateway

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := digest("k")
	for _, c := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"defaults", *NewConfig(), nil},
		{"keys on all interfaces", Config{Listen: "0.0.0.0:8001", APIKeys: []APIKey{{KeySHA256: good, UserID: "a", Scopes: []string{ScopeThreadsRead}}}}, nil},
		{"no keys, not loopback", Config{Listen: "0.0.0.0:8001"}, []string{`listen "0.0.0.0:8001": without api_keys the gateway serves one local user and binds loopback only`}},
		{"bad listen", Config{Listen: "8001"}, []string{`listen "8001" must be host:port`}},
		{"key problems", Config{Listen: "[::1]:1", APIKeys: []APIKey{
			{UserID: "a", Scopes: []string{ScopeThreadsRead}},
			{KeyEnv: "X", KeySHA256: good, UserID: "a", Scopes: []string{ScopeThreadsRead}},
			{KeySHA256: "abc", UserID: "a", Scopes: []string{ScopeThreadsRead}},
			{KeyEnv: "X", Scopes: []string{"threads:delete"}},
			{KeyEnv: "X", UserID: "b"},
		}}, []string{
			"api_keys[0]: set key_env (the variable holding the key) or key_sha256 (its hex SHA-256); the key itself never goes in the file",
			"api_keys[1]: set key_env or key_sha256, not both",
			"api_keys[2].key_sha256 must be 64 hex characters (a SHA-256 digest)",
			"api_keys[3].user_id is required",
			`api_keys[3].scopes: unknown scope "threads:delete" (threads:read, threads:write)`,
			"api_keys[4].scopes: at least one of threads:read, threads:write is required",
		}},
		{"negative limits", Config{Listen: "localhost:1", MaxBodyBytes: -1, MaxPromptChars: -1, RunTimeout: -1, ShutdownTimeout: -1, ProgressInterval: -1},
			[]string{"max_body_bytes must not be negative", "max_prompt_chars must not be negative", "run_timeout must not be negative", "shutdown_timeout must not be negative", "progress_interval must not be negative"}},
		{"lease and poll", Config{Listen: "localhost:1", LeaseTimeout: 500 * time.Millisecond, PollInterval: -1},
			[]string{"lease_timeout 500ms is below the minimum 1s (a lease is renewed every third of it)", "poll_interval must not be negative"}},
		{"negative lease", Config{Listen: "localhost:1", LeaseTimeout: -1}, []string{"lease_timeout must not be negative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(c.want) {
				t.Fatalf("errors:\n%s\nwant %d", err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

func TestKeyEnvResolvedAtStartWithoutLeakingValues(t *testing.T) {
	t.Setenv("AGENTMETER_TEST_KEY_SET", "s3cret-value")
	_, err := newAuthenticator([]APIKey{{KeyEnv: "AGENTMETER_TEST_KEY_UNSET", UserID: "a", Scopes: []string{ScopeThreadsRead}}})
	if err == nil || err.Error() != "gateway.api_keys[0].key_env: environment variable AGENTMETER_TEST_KEY_UNSET is not set" {
		t.Fatalf("unset key_env: %v", err)
	}
	a, err := newAuthenticator([]APIKey{{KeyEnv: "AGENTMETER_TEST_KEY_SET", UserID: "alice", Scopes: []string{ScopeThreadsRead}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range a.keys {
		if strings.Contains(string(k.digest[:]), "s3cret") {
			t.Fatal("key kept in clear")
		}
	}
}
