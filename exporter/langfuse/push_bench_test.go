package langfuse

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/internal/envconfig"
)

// BenchmarkPush is the exporter's work per batch of 20 agent runs (180 spans) without
// the network and without compression: shaping, encoding, splicing. Read with -benchmem:
// B/op and allocs/op are the per-batch cost; spans/s the rate.
func BenchmarkPush(b *testing.B) {
	cfg := newConfig(envconfig.FromMap(nil))
	cfg.Enabled, cfg.PublicKey, cfg.SecretKey = true, "pk-lf-bench", "sk-lf-bench"
	cfg.Compression = "none"
	e, err := newExporter(cfg, exportertest.NewNopSettings(componentType))
	if err != nil {
		b.Fatal(err)
	}
	e.client = &http.Client{Transport: vendortest.Discard(http.StatusOK)}
	vendortest.BenchPush(b, traceBatch(20), func(ctx context.Context, td ptrace.Traces) error {
		req, err := e.convert(ctx, td) // what queueing a batch does
		if err != nil {
			return err
		}
		return e.push(ctx, req)
	})
}
