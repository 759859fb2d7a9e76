package faulty

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Pipeline describes the collector the fault suite and the soak drive: OTLP/HTTP in,
// memory_limiter (optionally subagentmerge), then both vendor exporters, each with a
// file_storage persistent sending queue that retries forever.
type Pipeline struct {
	OTLPAddr       string // receiver endpoint host:port
	TelemetryPort  int    // the collector's own /metrics (0: none)
	StorageDir     string // file_storage directory ("" : in-memory queues)
	LangfuseURL    string // "" : no langfuse exporter
	LangfusePublic string
	LangfuseSecret string
	LangSmithURL   string // "" : no langsmith exporter
	LangSmithKey   string
	ClientTimeout  string // exporters' HTTP client timeout, e.g. "2s"
	LimitMiB       int    // memory_limiter limit_mib (0: 512)
	SpikeMiB       int    // memory_limiter spike_limit_mib (0: limit/4)
	QueueSize      int    // sending_queue.queue_size in requests (0: 100000)
	// MaxElapsed is retry_on_failure.max_elapsed_time ("": 0s, retry forever).
	MaxElapsed string
	// SubagentMerge adds subagentmerge (with this YAML body, e.g. "{num_traces: 10}")
	// after memory_limiter.
	SubagentMerge string
	// ExtraExporters are extra exporters (id -> YAML flow body) also fed by the pipeline.
	ExtraExporters map[string]string
}

// LangfuseAuth is the Authorization header the langfuse exporter sends for a key pair.
func LangfuseAuth(public, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(public+":"+secret))
}

// YAML renders the collector config.
func (p Pipeline) YAML() string {
	limit := p.LimitMiB
	if limit == 0 {
		limit = 512
	}
	spike := p.SpikeMiB
	if spike == 0 {
		spike = limit / 4
	}
	timeout := p.ClientTimeout
	if timeout == "" {
		timeout = "5s"
	}
	qsize := p.QueueSize
	if qsize == 0 {
		qsize = 100000
	}
	maxElapsed := p.MaxElapsed
	if maxElapsed == "" {
		maxElapsed = "0s"
	}
	storage := ""
	if p.StorageDir != "" {
		storage = "storage: file_storage, "
	}
	// retry forever, quickly: the suite asserts nothing is dropped, and fast retries keep
	// recovery short after a fault ends
	queue := fmt.Sprintf(`    timeout: %s
    sending_queue: {%ssizer: requests, num_consumers: 4, queue_size: %d}
    retry_on_failure: {initial_interval: 100ms, max_interval: 1s, max_elapsed_time: %s}
`, timeout, storage, qsize, maxElapsed)

	var b strings.Builder
	var extIDs, exporters []string
	if p.StorageDir != "" {
		fmt.Fprintf(&b, "extensions:\n  file_storage:\n    directory: %q\n", p.StorageDir)
		extIDs = append(extIDs, "file_storage")
	}
	fmt.Fprintf(&b, "receivers:\n  otlp:\n    protocols:\n      http: {endpoint: %q}\n", p.OTLPAddr)
	fmt.Fprintf(&b, "processors:\n  memory_limiter: {check_interval: 100ms, limit_mib: %d, spike_limit_mib: %d}\n", limit, spike)
	procs := []string{"memory_limiter"}
	if p.SubagentMerge != "" {
		fmt.Fprintf(&b, "  subagentmerge: %s\n", p.SubagentMerge)
		procs = append(procs, "subagentmerge")
	}
	b.WriteString("exporters:\n")
	if p.LangfuseURL != "" {
		fmt.Fprintf(&b, "  langfuse:\n    endpoint: %q\n    public_key: %q\n    secret_key: %q\n%s",
			p.LangfuseURL, p.LangfusePublic, p.LangfuseSecret, queue)
		exporters = append(exporters, "langfuse")
	}
	if p.LangSmithURL != "" {
		fmt.Fprintf(&b, "  langsmith:\n    enabled: true\n    endpoint: %q\n    api_key: %q\n%s", p.LangSmithURL, p.LangSmithKey, queue)
		exporters = append(exporters, "langsmith")
	}
	for id, body := range p.ExtraExporters {
		fmt.Fprintf(&b, "  %s: %s\n", id, body)
		exporters = append(exporters, id)
	}
	b.WriteString("service:\n")
	if len(extIDs) > 0 {
		fmt.Fprintf(&b, "  extensions: [%s]\n", strings.Join(extIDs, ", "))
	}
	b.WriteString("  telemetry:\n    logs: {level: info}\n")
	if p.TelemetryPort > 0 {
		fmt.Fprintf(&b, `    metrics:
      level: detailed
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}
`, p.TelemetryPort)
	} else {
		b.WriteString("    metrics: {level: none}\n")
	}
	fmt.Fprintf(&b, "  pipelines:\n    traces: {receivers: [otlp], processors: [%s], exporters: [%s]}\n",
		strings.Join(procs, ", "), strings.Join(exporters, ", "))
	return b.String()
}
