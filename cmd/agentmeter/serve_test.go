package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/gateway"
	"github.com/agentmeter/agentmeter/runtime/store"
)

func TestServeSectionsAreStrict(t *testing.T) {
	cfg, err := config.Parse([]byte(demoConfigYAML + `
gateway:
  listen: 127.0.0.1:9999
  api_keys:
    - key_env: AGENTMETER_KEY_ALICE
      user_id: alice
      scopes: [threads:read]
store:
  driver: postgres
  dsn_env: PG_DSN
`))
	if err != nil {
		t.Fatal(err)
	}
	gw := cfg.Sections["gateway"].(*gateway.Config)
	st := cfg.Sections["store"].(*store.Config)
	if gw.Listen != "127.0.0.1:9999" || len(gw.APIKeys) != 1 || gw.MaxBodyBytes != gateway.DefaultMaxBodyBytes || st.Driver != "postgres" || st.DSNEnv != "PG_DSN" {
		t.Fatalf("gateway %+v store %+v", gw, st)
	}
	// A key written into the file is an unknown key, not silently accepted.
	_, err = config.Parse([]byte(demoConfigYAML + "gateway:\n  api_keys:\n    - key: s3cret\n      user_id: a\n      scopes: [threads:read]\n"))
	if err == nil || !strings.Contains(err.Error(), `"key"`) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("inline key: %v", err)
	}
	_, err = config.Parse([]byte(demoConfigYAML + "gateway:\n  listen: 0.0.0.0:8001\nstore:\n  driver: mysql\n"))
	if err == nil || !strings.Contains(err.Error(), "without api_keys") || !strings.Contains(err.Error(), `driver "mysql" must be sqlite or postgres`) {
		t.Fatalf("bad sections: %v", err)
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer for the server's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeRunsTheDemoAndShutsDown starts serve() in-process on a free port with the
// demo configuration and an SQLite file, runs the demo through the API and stops it.
func TestServeRunsTheDemoAndShutsDown(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(demoConfigYAML+fmt.Sprintf("sandbox:\n  root: %s\nstore:\n  dsn: %s\n", filepath.Join(dir, "threads"), filepath.Join(dir, "data", "am.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfgPath, "127.0.0.1:0", logs) }()
	addrRE := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; {
		if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The gateway announces local mode from its serving goroutine, after the address line.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "serving one local user on loopback only"); {
		if time.Now().After(deadline) {
			t.Errorf("local mode not announced:\n%s", logs.String())
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Post(base+"/api/threads/demo/runs?wait=true", "application/json", strings.NewReader(`{"input":"Compare Paris and Tokyo"}`))
	if err != nil {
		t.Fatal(err)
	}
	var run store.Run
	err = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if err != nil || run.Status != store.StatusSuccess || run.Usage.TotalTokens == 0 || run.ModelName != "scripted-demo" {
		t.Fatalf("demo run = %+v, %v", run, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "am.db")); err != nil {
		t.Fatalf("database file: %v", err)
	}
}
