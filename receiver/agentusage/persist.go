package agentusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/agentmeter/agentmeter/internal/storageclient"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langfuse"
	"github.com/agentmeter/agentmeter/receiver/agentusage/internal/langsmith"
)

// With `storage` set, the runs and observations the receiver holds while they wait for
// their PATCH / update (acknowledged to the SDK already) are also kept through a
// storage extension (file_storage): one key per held entity, written before anything
// of the SDK's request goes on (a failed write answers 503, retryable, with nothing
// sent), deleted after the entity went on (heldDisk). At start every stored entity is
// held again, so a restart after kill -9 still emits it (on its PATCH, or at
// pending_timeout); one that went on is emitted again only if its deletion had not
// succeeded yet.
const (
	prefixRun = "langsmith/"
	prefixObs = "langfuse/"
)

type pendingStore struct {
	client storageclient.WalkClient
}

func startPendingStore(ctx context.Context, host component.Host, id, self component.ID) (*pendingStore, error) {
	c, err := storageclient.OpenWalker(ctx, host, id, component.KindReceiver, self)
	if err != nil {
		return nil, err
	}
	return &pendingStore{client: c}, nil
}

// restore holds again every run and observation a previous process left.
func (r *usageReceiver) restore(ctx context.Context) error {
	var runs []langsmith.Run
	var obs []langfuse.Observation
	var bad []error
	err := r.store.client.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		switch {
		case strings.HasPrefix(key, prefixRun):
			run, err := langsmith.DecodeStoredRun(value)
			if err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", key, err))
				return []*storage.Operation{storage.DeleteOperation(key)}, nil
			}
			runs = append(runs, run)
			r.runDisk.stored[strings.TrimPrefix(key, prefixRun)] = struct{}{}
		case strings.HasPrefix(key, prefixObs):
			var o langfuse.Observation
			if err := json.Unmarshal(value, &o); err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", key, err))
				return []*storage.Operation{storage.DeleteOperation(key)}, nil
			}
			obs = append(obs, o)
			r.obsDisk.stored[strings.TrimPrefix(key, prefixObs)] = struct{}{}
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("storage: reading held runs: %w", err)
	}
	if len(bad) > 0 {
		r.set.Logger.Error("agentusage: stored entries that do not decode were dropped", zap.Error(errors.Join(bad...)))
	}
	now := r.now()
	r.runsMu.Lock()
	evictedRuns := r.runs.Repark(runs, now)
	r.runsMu.Unlock()
	r.eventsMu.Lock()
	evictedObs := r.lfEvents.Restore(obs, now)
	r.eventsMu.Unlock()
	if len(runs)+len(obs) > 0 {
		r.set.Logger.Info("agentusage: restored held runs from storage", zap.Int("langsmith_runs", len(runs)), zap.Int("langfuse_entities", len(obs)))
	}
	emitHeld(ctx, r, r.runFace(), evictedRuns, holdAgain)
	emitHeld(ctx, r, r.observationFace(), evictedObs, holdAgain)
	return nil
}

// heldDisk is one face's held entities on disk (used under the face's lock, or at start
// before anything else runs): written before anything of their request goes on,
// deleted after they went on. A deletion the disk refuses is remembered and tried again
// at every flush and at Shutdown; a kill -9 before it succeeds sends them again at the
// next start. Deleted before they went on, a kill -9 while the pipeline had them would
// lose them instead. Only what is stored is deleted: most runs come finished and are
// never written.
type heldDisk[T any] struct {
	r      *usageReceiver
	what   string // "runs", "observations": for errors and logs
	prefix string // of its keys in the storage
	id     func(T) string
	encode func(T) ([]byte, error)
	held   func([]T) (held, gone []T)
	// stored are the ids on disk (written, or read back at start), undeleted those
	// whose deletion the disk refused
	stored, undeleted map[string]struct{}
}

func newHeldDisk[T any](r *usageReceiver, what, prefix string, id func(T) string, encode func(T) ([]byte, error), held func([]T) (held, gone []T)) *heldDisk[T] {
	return &heldDisk[T]{r: r, what: what, prefix: prefix, id: id, encode: encode, held: held, undeleted: map[string]struct{}{}, stored: map[string]struct{}{}}
}

// write stores items, as held now; a deletion still owed for one of them is dropped.
func (d *heldDisk[T]) write(ctx context.Context, items []T) error {
	if d.r.store == nil || len(items) == 0 {
		return nil
	}
	ops := make([]*storage.Operation, 0, len(items))
	for _, it := range items {
		b, err := d.encode(it)
		if err != nil {
			return fmt.Errorf("storage: encoding held %s %s: %w", d.what, d.id(it), err)
		}
		ops = append(ops, storage.SetOperation(d.prefix+d.id(it), b))
	}
	if err := d.r.store.client.Batch(ctx, ops...); err != nil {
		return err
	}
	for _, it := range items {
		delete(d.undeleted, d.id(it))
		d.stored[d.id(it)] = struct{}{}
	}
	return nil
}

// remove deletes the items of groups that went on, with the deletions still owed. It
// runs for every request: most hold nothing, and most runs were never stored.
func (d *heldDisk[T]) remove(ctx context.Context, groups ...[]T) {
	if d.r.store == nil || len(d.stored) == 0 {
		return // undeleted is a part of stored
	}
	for _, items := range groups {
		for _, it := range items {
			if _, ok := d.stored[d.id(it)]; ok {
				d.undeleted[d.id(it)] = struct{}{}
			}
		}
	}
	if err := d.retry(ctx); err != nil {
		d.r.set.Logger.Warn("agentusage: deleting held "+d.what+" that went on from storage failed; tried again at the next flush, a restart before then sends them again", zap.Int("count", len(d.undeleted)), zap.Error(err))
	}
}

// retry deletes what is still owed.
func (d *heldDisk[T]) retry(ctx context.Context) error {
	if d.r.store == nil || len(d.undeleted) == 0 {
		return nil
	}
	ops := make([]*storage.Operation, 0, len(d.undeleted))
	for id := range d.undeleted {
		ops = append(ops, storage.DeleteOperation(d.prefix+id))
	}
	if err := d.r.store.client.Batch(ctx, ops...); err != nil {
		return err
	}
	for id := range d.undeleted {
		delete(d.stored, id)
	}
	clear(d.undeleted)
	return nil
}

// undo puts the disk back to what the face holds for items a refused request had
// written: the held version of each, or none.
func (d *heldDisk[T]) undo(ctx context.Context, items []T) {
	if d.r.store == nil || len(items) == 0 {
		return
	}
	held, gone := d.held(items)
	ops := make([]*storage.Operation, 0, len(items))
	for _, g := range gone {
		ops = append(ops, storage.DeleteOperation(d.prefix+d.id(g)))
	}
	var errs []error
	for _, h := range held {
		b, err := d.encode(h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ops = append(ops, storage.SetOperation(d.prefix+d.id(h), b))
	}
	if err := d.r.store.client.Batch(ctx, ops...); err != nil {
		errs = append(errs, err)
		for _, g := range gone { // owed, as remove owes a refused deletion
			d.undeleted[d.id(g)] = struct{}{}
		}
	} else {
		for _, g := range gone {
			delete(d.stored, d.id(g))
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.r.set.Logger.Error("agentusage: restoring stored "+d.what+" after a refusal failed", zap.Error(err))
	}
}

func encodeObservation(o langfuse.Observation) ([]byte, error) { return json.Marshal(o) }
