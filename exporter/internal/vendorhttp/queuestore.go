package vendorhttp

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"

	"github.com/agentmeter/agentmeter/internal/storageclient"
)

// A persistent sending queue stores each queued request whole, and bbolt rewrites a
// value's neighbours on every write, read and delete of the queue: both exporters start
// exporterhelper's queue with a host whose storage extension hands out packed clients
// (storageclient.Packed), so only the bytes on disk are fewer; the queue, its config and
// its metrics are exporterhelper's.

// packedQueue starts the exporter on storageclient.PackingHost, and puts the
// exporter's revisions (revs, when it has them) on the same storage extension, in a
// client of their own (revstore.go): read back before the queue hands out what it kept.
type packedQueue struct {
	exporter.Traces
	storageID component.ID
	self      component.ID
	revs      *Revisions
}

// Capabilities: the exporter does not change or keep the batches it is given. A
// persistent queue encodes each one into storage before ConsumeTraces returns and keeps
// nothing of it (its batcher merges the copies it reads back); a batch over the
// queue's bytes is cut into copies first (admission). exporterhelper declares
// MutatesData for every queue that batches, since its in-memory queue holds and merges
// the caller's own requests, and the collector would then clone each batch it also
// hands to another consumer (the other vendor exporter, the token metrics).
func (q packedQueue) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (q packedQueue) Start(ctx context.Context, host component.Host) error {
	if q.revs != nil {
		c, err := storageclient.OpenAs(ctx, host, q.storageID, component.KindExporter, q.self, revisionsClient)
		if err != nil {
			return err
		}
		if err := q.revs.attach(ctx, c); err != nil {
			return errors.Join(fmt.Errorf("storage: %w", err), c.Close(ctx))
		}
	}
	return q.Traces.Start(ctx, storageclient.PackingHost(host, q.storageID))
}

func (q packedQueue) Shutdown(ctx context.Context) error {
	err := q.Traces.Shutdown(ctx) // its pushes are over
	if q.revs != nil {
		err = errors.Join(err, q.revs.detach(ctx))
	}
	return err
}
