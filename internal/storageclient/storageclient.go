// Package storageclient opens the client a component gets from the storage extension
// its config names (`storage: file_storage`): the one lookup, with the errors a user
// sees at start when the extension is missing, is not a storage extension, or cannot
// list its entries.
package storageclient

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Open returns the client that the storage extension id of host gives the component
// self of kind. The caller closes it.
func Open(ctx context.Context, host component.Host, id component.ID, kind component.Kind, self component.ID) (storage.Client, error) {
	return OpenAs(ctx, host, id, kind, self, "")
}

// OpenAs is Open for a client of the component's own named name (file_storage: a file
// of its own), beside the one Open gives it or one a helper of it holds.
func OpenAs(ctx context.Context, host component.Host, id component.ID, kind component.Kind, self component.ID, name string) (storage.Client, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("storage: extension %q not found (add it under extensions and service.extensions)", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: extension %q is not a storage extension", id)
	}
	c, err := se.GetClient(ctx, kind, self, name)
	if err != nil {
		return nil, fmt.Errorf("storage: getting a client of %q: %w", id, err)
	}
	return c, nil
}

// WalkClient is a client that can also list its entries, as file_storage's can: a
// component that holds an unknown set of keys reads them back at start with Walk.
type WalkClient interface {
	storage.Client
	storage.Walker
}

// OpenWalker is Open for a component that lists its entries at start; an extension
// whose client cannot is refused (and its client closed).
func OpenWalker(ctx context.Context, host component.Host, id component.ID, kind component.Kind, self component.ID) (WalkClient, error) {
	c, err := Open(ctx, host, id, kind, self)
	if err != nil {
		return nil, err
	}
	w, ok := c.(WalkClient)
	if !ok {
		_ = c.Close(ctx)
		return nil, fmt.Errorf("storage: extension %q cannot list its entries (file_storage can)", id)
	}
	return w, nil
}
