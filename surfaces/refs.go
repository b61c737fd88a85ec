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

// RefSetter is the write half of a surface's refs (its Refs: small values
// kept durably across restarts, the store's surface refs).
type RefSetter interface {
	SetRef(ctx context.Context, key, value string) error
}

// RunRefSetter is refs that know which run a value belongs to: retention
// removes a run's refs with the run, and the refs of no run once they
// were not written for the retention period (store.Refs implements it).
type RunRefSetter interface {
	SetRunRef(ctx context.Context, runID, key, value string) error
}

// SetRunRef stores value under key in refs as a ref of the run runID when
// refs keep runs (RunRefSetter), else as a ref of no run.
func SetRunRef(ctx context.Context, refs RefSetter, runID, key, value string) error {
	if r, ok := refs.(RunRefSetter); ok && runID != "" {
		return r.SetRunRef(ctx, runID, key, value)
	}
	return refs.SetRef(ctx, key, value)
}
