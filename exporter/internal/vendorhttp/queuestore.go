package vendorhttp

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"

	"github.com/agentmeter/agentmeter/internal/storageclient"
)

// A persistent sending queue stores each queued request whole, and bbolt rewrites a
// value's neighbours on every write, read and delete of the queue: both exporters start
// exporterhelper's queue with a host whose storage extension hands out packed clients
// (storageclient.Packed), so only the bytes on disk are fewer; the queue, its config and
// its metrics are exporterhelper's.

// packedQueue starts the exporter on storageclient.PackingHost.
type packedQueue struct {
	exporter.Traces
	storageID component.ID
}

func (q packedQueue) Start(ctx context.Context, host component.Host) error {
	return q.Traces.Start(ctx, storageclient.PackingHost(host, q.storageID))
}
