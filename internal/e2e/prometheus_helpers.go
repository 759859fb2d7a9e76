//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A real Prometheus server for end-to-end tests: Debian's `prometheus` binary (installed by
// .ci/setup.d/20-prometheus.sh) started on a free loopback port with a generated scrape
// config, queried with PromQL over its HTTP API. Nothing here knows about agentmeter's
// metrics, so any test that needs "what would Prometheus see" can use it.

// ScrapeJob is one scrape_configs entry.
type ScrapeJob struct {
	Name    string   // job_name
	Targets []string // host:port of each target
	// MetricsPath defaults to /metrics.
	MetricsPath string
	// HonorLabels keeps the target's own job/instance labels instead of renaming them to
	// exported_job/exported_instance (the collector's prometheus exporter sets job from
	// service.name).
	HonorLabels bool
}

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// ScrapeInterval defaults to 1s so tests see new samples quickly.
	ScrapeInterval time.Duration
	Jobs           []ScrapeJob
	// RuleFiles are loaded as rule_files (recording and alerting rules), evaluated at the
	// scrape interval.
	RuleFiles []string
}

// Prometheus is one running Prometheus server.
type Prometheus struct {
	URL string // http://127.0.0.1:<port>
	Dir string
	*process
}

// PrometheusBinary returns the Prometheus server binary: $AGENTMETER_PROMETHEUS when set,
// else `prometheus` on PATH. A missing binary fails the test with the install command:
// CI installs it, so a skip would hide a broken setup script.
func PrometheusBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENTMETER_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus server not found (%v): install it with .ci/setup.d/20-prometheus.sh "+
			"(apt-get install --no-install-recommends prometheus) or set AGENTMETER_PROMETHEUS", err)
	}
	return p
}

// PrometheusConfigYAML renders the server config for opts.
func PrometheusConfigYAML(opts PrometheusOptions) string {
	interval := opts.ScrapeInterval
	if interval <= 0 {
		interval = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n",
		promDuration(interval), promDuration(interval), promDuration(interval))
	if len(opts.RuleFiles) > 0 {
		files, _ := json.Marshal(opts.RuleFiles)
		fmt.Fprintf(&b, "rule_files: %s\n", files)
	}
	b.WriteString("scrape_configs:\n")
	for _, j := range opts.Jobs {
		path := j.MetricsPath
		if path == "" {
			path = "/metrics"
		}
		targets, _ := json.Marshal(j.Targets) // a JSON array is valid YAML
		fmt.Fprintf(&b, "  - job_name: %q\n    metrics_path: %q\n    honor_labels: %t\n    static_configs:\n      - targets: %s\n",
			j.Name, path, j.HonorLabels, targets)
	}
	return b.String()
}

// promDuration formats d the way Prometheus parses durations (no fractional units).
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// StartPrometheus runs a Prometheus server with a fresh TSDB in a temp folder and waits
// until /-/ready answers. It is stopped (SIGTERM) at test cleanup, and its logs are
// printed if the test failed.
func StartPrometheus(t testing.TB, opts PrometheusOptions) *Prometheus {
	t.Helper()
	bin := PrometheusBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(PrometheusConfigYAML(opts)), 0o600); err != nil {
		t.Fatalf("write prometheus config: %v", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p := &Prometheus{URL: "http://" + addr, Dir: dir}
	p.process = startProcess(t, dir, nil, bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		// Debian's defaults point at /usr/share/prometheus; the API needs neither
		"--web.console.templates="+dir,
		"--web.console.libraries="+dir,
		"--log.level=warn",
	)
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", p.Logs())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.Done():
			t.Fatalf("prometheus exited at start:\n%s", p.Logs())
		default:
		}
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s after 30s (last error %v):\n%s", addr, err, p.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends the server gracefully (SIGTERM, SIGKILL after 10 s) and waits.
func (p *Prometheus) Stop() { p.Process.Stop(10 * time.Second) }

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query at the current time. Scalars come back as one sample
// without labels; an empty vector is an empty slice, not an error.
func (p *Prometheus) Query(ctx context.Context, promql string) ([]Sample, error) {
	u := p.URL + "/api/v1/query?" + url.Values{"query": {promql}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build query: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", promql, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("query %q: read: %w", promql, err)
	}
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %q: decode %s: %w", promql, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", promql, r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return nil, fmt.Errorf("query %q: decode vector: %w", promql, err)
		}
		out := make([]Sample, 0, len(vec))
		for _, s := range vec {
			v, err := sampleValue(s.Value[1])
			if err != nil {
				return nil, fmt.Errorf("query %q: %w", promql, err)
			}
			out = append(out, Sample{Labels: s.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var sc [2]any
		if err := json.Unmarshal(r.Data.Result, &sc); err != nil {
			return nil, fmt.Errorf("query %q: decode scalar: %w", promql, err)
		}
		v, err := sampleValue(sc[1])
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", promql, err)
		}
		return []Sample{{Value: v}}, nil
	default:
		return nil, fmt.Errorf("query %q: result type %q is not supported (use an instant vector or scalar)", promql, r.Data.ResultType)
	}
}

func sampleValue(raw any) (float64, error) {
	s, ok := raw.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", raw)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return v, nil
}

// QueryByLabel runs promql (normally `sum by (label) (...)`) and returns value per label value.
func (p *Prometheus) QueryByLabel(ctx context.Context, promql, label string) (map[string]float64, error) {
	samples, err := p.Query(ctx, promql)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		out[s.Labels[label]] += s.Value
	}
	return out, nil
}

// WaitForValue polls a query that yields one sample (e.g. `sum(x)`) until it equals want,
// and returns the last value seen. It fails the test on timeout, naming both numbers.
func (p *Prometheus) WaitForValue(t testing.TB, promql string, want float64, timeout time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		last    float64
		lastErr error
		seen    bool
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		samples, err := p.Query(ctx, promql)
		cancel()
		lastErr = err
		if err == nil && len(samples) == 1 {
			last, seen = samples[0].Value, true
			if last == want {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %s = %v (seen %t, error %v), want %v", timeout, promql, last, seen, lastErr, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitForTargetsUp waits until every scrape target of job reports up == 1.
func (p *Prometheus) WaitForTargetsUp(t testing.TB, job string, n int, timeout time.Duration) {
	t.Helper()
	p.WaitForValue(t, fmt.Sprintf(`sum(up{job=%q})`, job), float64(n), timeout)
}
