package store

import (
	"context"
	"fmt"
	"time"
)

// Surface refs and retention: a ref stored for a run (SetRunRef: a set's
// message, its answers shown, the run's thread) is removed with the run
// (runTables); a ref of no run (a repository's poll cursor, a comment
// seen, the sets waiting on an issue) is removed by PurgeRefs once it
// was last written before the retention's cutoff.

// SetRunRef stores a surface's value under key as a ref of the run runID
// ("": of no run, unless an earlier write named one: a ref keeps its run).
func (s *Store) SetRunRef(ctx context.Context, surface, runID, key, value string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO surface_refs (surface, key, value, run_id, updated_at) VALUES (?,?,?,?,?)
		ON CONFLICT(surface, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
		run_id = CASE WHEN excluded.run_id <> '' THEN excluded.run_id ELSE surface_refs.run_id END`,
		surface, key, value, runID, nanos(s.now()))
	if err != nil {
		return fmt.Errorf("set ref %s/%s: %w", surface, key, err)
	}
	return nil
}

// SetRunRef stores value under key as a ref of the run runID: retention
// removes it with the run.
func (r Refs) SetRunRef(ctx context.Context, runID, key, value string) error {
	return r.s.SetRunRef(ctx, r.surface, runID, key, value)
}

// PurgeRefs removes the surface refs last written before before that
// belong to no run, or to a run that is gone; it returns how many. The
// refs of a run that is still stored stay as long as it does.
func (s *Store) PurgeRefs(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM surface_refs WHERE updated_at < ?
		AND (run_id = '' OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = surface_refs.run_id))`, nanos(before))
	if err != nil {
		return 0, fmt.Errorf("purge surface refs: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge surface refs: %w", err)
	}
	return n, nil
}
