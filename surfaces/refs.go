package surfaces

import (
	"context"
	"sync"
)

// Refs is a small durable key-value store, implemented by the orchestrator's
// store (store.Store.RefsFor): where a surface remembers what it posted and
// which answers it took, so that a restarted process finds them. Keys and
// values are short strings.
type Refs interface {
	// Ref returns the value stored under key, and whether there is one.
	Ref(ctx context.Context, key string) (value string, ok bool, err error)
	// SetRef stores value under key, replacing any previous value.
	SetRef(ctx context.Context, key, value string) error
}

// MemoryRefs is a Refs kept in memory, for tests and for running without a
// store. The zero value is ready to use; it is safe for concurrent use.
type MemoryRefs struct {
	mu sync.Mutex
	m  map[string]string
}

// Ref implements Refs.
func (r *MemoryRefs) Ref(_ context.Context, key string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	return v, ok, nil
}

// SetRef implements Refs.
func (r *MemoryRefs) SetRef(_ context.Context, key, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]string{}
	}
	r.m[key] = value
	return nil
}
