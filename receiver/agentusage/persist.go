package agentusage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// storage extension (file_storage): one key per held entity, written before the SDK's
// request is answered, deleted before the entity goes on (and written again if the
// pipeline refuses it). At start every stored entity is held again, so a restart after
// kill -9 still emits it (on its PATCH, or at pending_timeout), and an entity that went
// on is not emitted again. A failed write answers the SDK with 503 (retryable) before
// anything of its request went on.
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
		case strings.HasPrefix(key, prefixObs):
			var o langfuse.Observation
			if err := json.Unmarshal(value, &o); err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", key, err))
				return []*storage.Operation{storage.DeleteOperation(key)}, nil
			}
			obs = append(obs, o)
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
	r.emitRuns(ctx, evictedRuns, evicted)
	r.emitObservations(ctx, evictedObs, evicted)
	return nil
}

// syncRuns stores the runs now held and deletes those that went on.
func (r *usageReceiver) syncRuns(ctx context.Context, held, gone []langsmith.Run) error {
	if r.store == nil || len(held)+len(gone) == 0 {
		return nil
	}
	ops := make([]*storage.Operation, 0, len(held)+len(gone))
	for _, g := range gone {
		ops = append(ops, storage.DeleteOperation(prefixRun+g.ID))
	}
	for _, h := range held {
		b, err := langsmith.EncodeRun(h)
		if err != nil {
			return fmt.Errorf("storage: encoding run %s: %w", h.ID, err)
		}
		ops = append(ops, storage.SetOperation(prefixRun+h.ID, b))
	}
	return r.store.client.Batch(ctx, ops...)
}

// unsyncRuns puts the disk back to what the translator holds for the runs of a plan
// the pipeline refused (its request is answered with a retryable refusal): stored
// before the pipeline was asked, they must not outlive the refusal, and the runs it
// completed are still held.
func (r *usageReceiver) unsyncRuns(ctx context.Context, plan *langsmith.Plan) {
	if r.store == nil {
		return
	}
	held, gone := r.runs.Held(slices.Concat(plan.Park, plan.Complete, plan.Evict))
	if err := r.syncRuns(ctx, held, gone); err != nil {
		r.set.Logger.Error("agentusage: restoring stored runs after a refusal failed; a kill -9 may lose or resend them", zap.Error(err))
	}
}

// unsyncObservations is unsyncRuns for Langfuse observations and trace roots.
func (r *usageReceiver) unsyncObservations(ctx context.Context, obs []langfuse.Observation) {
	if r.store == nil {
		return
	}
	held, gone := r.lfEvents.Held(obs)
	if err := r.syncObservations(ctx, held, gone); err != nil {
		r.set.Logger.Error("agentusage: restoring stored observations after a refusal failed; a kill -9 may lose or resend them", zap.Error(err))
	}
}

// syncObservations stores the observations and roots now held and deletes those that went on.
func (r *usageReceiver) syncObservations(ctx context.Context, held, gone []langfuse.Observation) error {
	if r.store == nil || len(held)+len(gone) == 0 {
		return nil
	}
	ops := make([]*storage.Operation, 0, len(held)+len(gone))
	for _, g := range gone {
		ops = append(ops, storage.DeleteOperation(prefixObs+langfuse.StorageKey(g)))
	}
	for _, h := range held {
		b, err := json.Marshal(h)
		if err != nil {
			return fmt.Errorf("storage: encoding observation %s: %w", h.ID, err)
		}
		ops = append(ops, storage.SetOperation(prefixObs+langfuse.StorageKey(h), b))
	}
	return r.store.client.Batch(ctx, ops...)
}
