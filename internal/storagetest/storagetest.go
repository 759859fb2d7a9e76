// Package storagetest is a storage extension in memory for tests of components that
// keep state through one (file_storage): it outlives the components of one test the way
// a file_storage directory outlives a killed process, and lists its entries as
// file_storage does.
package storagetest

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Storage is the extension and its one client. The zero value is not usable; call New.
type Storage struct {
	mu   sync.Mutex
	data map[string][]byte
	fail error
	// seen, when set, is told of every batch that was applied (SetOnBatch)
	seen func(ops []*storage.Operation)
	// names are the named clients, each a store of its own, as file_storage gives each
	// name a file of its own (it keys files by component too; here every component
	// shares the unnamed store and a name's store)
	names map[string]*Storage
}

var (
	_ storage.Extension = (*Storage)(nil)
	_ storage.Walker    = (*Storage)(nil)
)

// New returns an empty storage.
func New() *Storage { return &Storage{data: map[string][]byte{}} }

// Fail makes every write fail with err (a full disk); nil makes writes work again.
func (s *Storage) Fail(err error) {
	s.mu.Lock()
	s.fail = err
	names := make([]*Storage, 0, len(s.names))
	for _, n := range s.names {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		n.Fail(err)
	}
}

// SetOnBatch has fn told of every batch the unnamed client applies, in order, with the
// storage's lock held (fn must not call it); nil stops it.
func (s *Storage) SetOnBatch(fn func(ops []*storage.Operation)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = fn
}

// Count is the number of keys the unnamed client stores under prefix.
func (s *Storage) Count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.data {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// Host returns a host whose extensions are s under id.
func (s *Storage) Host(id component.ID) component.Host { return host{id: id, s: s} }

type host struct {
	id component.ID
	s  *Storage
}

func (h host) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{h.id: h.s}
}

func (*Storage) Start(context.Context, component.Host) error { return nil }
func (*Storage) Shutdown(context.Context) error              { return nil }

// GetClient returns s itself for the unnamed client, and a store of its own for each
// name, which outlives the component as s does.
func (s *Storage) GetClient(_ context.Context, _ component.Kind, _ component.ID, name string) (storage.Client, error) {
	if name == "" {
		return s, nil
	}
	return s.Named(name), nil
}

// Named is the store of the named client name (exporterhelper's persistent queue names
// its client after the signal: "traces").
func (s *Storage) Named(name string) *Storage {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.names[name]
	if !ok {
		if s.names == nil {
			s.names = map[string]*Storage{}
		}
		n = New()
		n.fail = s.fail
		s.names[name] = n
	}
	return n
}

func (s *Storage) Get(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[k], nil
}

func (s *Storage) Set(ctx context.Context, k string, v []byte) error {
	return s.Batch(ctx, storage.SetOperation(k, v))
}

func (s *Storage) Delete(ctx context.Context, k string) error {
	return s.Batch(ctx, storage.DeleteOperation(k))
}

func (*Storage) Close(context.Context) error { return nil }

// Batch applies ops in one step; with Fail set, a batch that writes fails whole.
func (s *Storage) Batch(_ context.Context, ops ...*storage.Operation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		if op.Type != storage.Get && s.fail != nil {
			return s.fail
		}
	}
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = s.data[op.Key]
		case storage.Set:
			s.data[op.Key] = append([]byte(nil), op.Value...)
		case storage.Delete:
			delete(s.data, op.Key)
		}
	}
	if s.seen != nil {
		s.seen(ops)
	}
	return nil
}

// Walk calls fn on every entry and applies the operations it returns.
func (s *Storage) Walk(ctx context.Context, fn storage.WalkFunc) error {
	s.mu.Lock()
	keys := make([]string, 0, len(s.data))
	for k := range s.data {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	for _, k := range keys {
		v, _ := s.Get(ctx, k)
		ops, err := fn(k, v)
		if err != nil {
			return err
		}
		if err := s.Batch(ctx, ops...); err != nil {
			return err
		}
	}
	return nil
}
