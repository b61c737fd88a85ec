package surfaces

import "context"

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
