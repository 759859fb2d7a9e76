// Package filestoragetest starts a real file_storage extension for tests: the storage
// the shipped config uses, on a folder of the test's.
package filestoragetest

import (
	"context"
	"errors"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Host is a component host holding extensions by id.
type Host map[component.ID]component.Component

// GetExtensions returns h.
func (h Host) GetExtensions() map[component.ID]component.Component { return h }

// Start starts file_storage in dir, with max_size maxSize (0: none), shut down when tb
// ends. It returns the extension's id and a host holding it. A process killed and
// restarted is dir copied as it is (os.CopyFS) and started again.
func Start(tb testing.TB, dir string, maxSize int64) (component.ID, Host) {
	tb.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory, cfg.Compaction.Directory = dir, dir
	cfg.MaxSize = maxSize
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		tb.Fatalf("file_storage: %v", err)
	}
	if err := ext.Start(context.Background(), Host{}); err != nil {
		tb.Fatalf("file_storage: starting: %v", err)
	}
	tb.Cleanup(func() {
		if err := ext.Shutdown(context.Background()); err != nil {
			tb.Errorf("file_storage: shutting down: %v", err)
		}
	})
	id := component.NewID(f.Type())
	return id, Host{id: ext}
}

// ExporterClient starts file_storage in dir (Start) and returns what opens the client
// named name of exporter self from it, each call a new one, as a restarted exporter gets.
func ExporterClient(tb testing.TB, dir string, self component.ID, name string) (open func() storage.Client) {
	tb.Helper()
	id, host := Start(tb, dir, 0)
	return func() storage.Client {
		c, err := host[id].(storage.Extension).GetClient(context.Background(), component.KindExporter, self, name)
		if err != nil {
			tb.Fatalf("file_storage: opening %s: %v", name, err)
		}
		return c
	}
}

// Flaky is a store whose writes fail while Fail is set, as a full or failing disk's do.
// It lists its entries as the store it wraps does.
type Flaky struct {
	storage.Client
	Fail bool
}

// Batch fails while f.Fail is set.
func (f *Flaky) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if f.Fail {
		return errors.New("disk full")
	}
	return f.Client.Batch(ctx, ops...)
}

// Walk lists the wrapped store's entries.
func (f *Flaky) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return f.Client.(storage.Walker).Walk(ctx, fn)
}
