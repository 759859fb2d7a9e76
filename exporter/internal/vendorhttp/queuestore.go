package vendorhttp

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/storageclient"
)

// A persistent sending queue stores each queued request whole, and bbolt rewrites a
// value's neighbours on every write, read and delete of the queue: both exporters start
// exporterhelper's queue with a host whose storage extension hands out packed clients
// (storageclient.Packed), so only the bytes on disk are fewer; the queue, its config and
// its metrics are exporterhelper's.

// Remembered is what an exporter remembers between pushes that must outlive a restart
// as its persistent queue does (Revisions; Langfuse's trace values): kept in a storage
// client of its own, named ClientName, of the queue's storage extension (file_storage:
// a file of its own). It is attached before the queue hands anything out, and
// detached once the exporter stopped.
type Remembered interface {
	ClientName() string
	Attach(ctx context.Context, c storage.Client) error
	Detach(ctx context.Context) error
}

// packedQueue starts the exporter on storageclient.PackingHost, and keeps what the
// exporter remembers on the same storage extension.
type packedQueue struct {
	exporter.Traces
	storageID  component.ID
	self       component.ID
	remembered []Remembered
	logger     *zap.Logger
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
	for _, r := range q.remembered {
		c, err := storageclient.OpenAs(ctx, host, q.storageID, component.KindExporter, q.self, r.ClientName())
		if err != nil {
			return err
		}
		if err := r.Attach(ctx, c); err != nil {
			cerr := c.Close(ctx)
			if errors.Is(err, ErrCannotList) && cerr == nil {
				// the queue itself does not need to list: it works as it did
				q.logger.Warn("the sending queue's storage cannot list its entries (file_storage can): what the exporter remembers between pushes is in memory only, and a restart forgets it",
					zap.String("remembered", r.ClientName()))
				continue
			}
			return errors.Join(fmt.Errorf("storage: %s: %w", r.ClientName(), err), cerr)
		}
	}
	return q.Traces.Start(ctx, storageclient.PackingHost(host, q.storageID))
}

func (q packedQueue) Shutdown(ctx context.Context) error {
	err := q.Traces.Shutdown(ctx) // its pushes are over
	for _, r := range q.remembered {
		err = errors.Join(err, r.Detach(ctx))
	}
	return err
}

// ConsumeTraces queues td. What the exporter remembered of it is written before it is
// queued, by its conversion; when that write fails (Unstored) the batch is refused once
// queued, retryably: acknowledged, it would be remembered in memory only, and a kill -9
// would lose it. The sender's retry writes it (the batch is queued twice; a vendor that
// upserts takes the same version again).
func (q packedQueue) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if len(q.remembered) == 0 {
		return q.Traces.ConsumeTraces(ctx, td)
	}
	u := new(unstored)
	if err := q.Traces.ConsumeTraces(context.WithValue(ctx, unstoredKey{}, u), td); err != nil {
		return err
	}
	if u.err != nil {
		return fmt.Errorf("storage: the batch is queued, but what the exporter remembers of it is not on disk; send it again: %w", u.err)
	}
	return nil
}

type unstoredKey struct{}

// unstored is what the conversion of one batch reports through Unstored (in the call
// that queues it: exporterhelper converts before it returns).
type unstored struct{ err error }

// Unstored says, from the conversion of a batch being queued, that what the exporter
// remembered of it could not be written (err): the batch is refused once queued
// (packedQueue.ConsumeTraces). A batch read back from the queue is converted without
// that context: nothing is recorded, and its values go with the next write.
func Unstored(ctx context.Context, err error) {
	if u, ok := ctx.Value(unstoredKey{}).(*unstored); ok {
		u.err = errors.Join(u.err, err)
	}
}
