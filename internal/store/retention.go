package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Retention (config retention.runs, `orchestrator gc`): a finished run
// last changed before a cutoff is removed with every row that belongs to
// it — its turns, question sets with their questions and answers (the
// decision log), tool calls and their decisions, rules, policy, lease,
// sessions, git guard, the tool calls its turns recorded, its delivery,
// its schedule tick and the surface refs stored for it (refs.go). A run is kept, however old, when
//   - it is not over (queued, running, waiting, interrupted);
//   - its delivery is pending (serve still retries the push) or its
//     worktree was not removed (gc removes worktrees first; the delivery
//     row is how it finds them);
//   - it holds a live lease;
//   - it owns the set at the head of the set feed: the next position is
//     MAX(seq)+1 (feed.go), so removing the head would hand its position
//     out again, and a watcher that saw it would miss the next change.

// runTables are the tables with a run_id column that refers to runs, in
// the order their rows are removed (before runs). The tables keyed by a
// set (questions, answers) are removed through question_sets first.
// TestPurgeCoversEveryRunTable checks that this is every such table.
var runTables = []string{"turns", "tool_calls", "run_rules", "run_policies", "run_leases", "sessions",
	"git_guards", "turn_tool_calls", "deliveries", "schedule_ticks", "run_requests", "follow_ups", "rule_uses",
	"surface_refs", "remember_offers"}

// setTables are the tables with a set_id column that refers to
// question_sets.
var setTables = []string{"questions", "answers", "cap_raises", "group_answers"}

// expiredWhere selects the runs of r that retention removes; its
// arguments are the cutoff and now, in nanoseconds.
const expiredWhere = `r.status IN ('done', 'failed', 'cancelled', 'stopped') AND r.updated_at < ?
	AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.run_id = r.id AND (d.pending <> 0 OR d.removed_at = 0))
	AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = r.id AND l.expires_at > ?)
	AND NOT EXISTS (SELECT 1 FROM question_sets h WHERE h.run_id = r.id AND h.seq = (SELECT MAX(seq) FROM question_sets))`

// ExpiredRun is a finished run that retention would remove.
type ExpiredRun struct {
	ID        string
	Spec      string
	Status    RunStatus
	UpdatedAt time.Time
}

// ExpiredRuns lists the finished runs last changed before before that
// PurgeRuns would remove now, oldest first.
func (s *Store) ExpiredRuns(ctx context.Context, before time.Time) ([]ExpiredRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.spec, r.status, r.updated_at FROM runs r WHERE `+expiredWhere+`
		ORDER BY r.updated_at, r.id`, nanos(before), nanos(s.now()))
	if err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	defer rows.Close()
	var out []ExpiredRun
	for rows.Next() {
		var e ExpiredRun
		var at int64
		if err := rows.Scan(&e.ID, &e.Spec, &e.Status, &at); err != nil {
			return nil, fmt.Errorf("expired runs: %w", err)
		}
		e.UpdatedAt = fromNanos(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Purged is what PurgeRuns removed.
type Purged struct {
	Runs []string // the IDs of the runs removed
	Rows int64    // the rows removed, the runs' own included
}

// DefaultPurgeBatch is how many runs PurgeRuns removes per transaction
// when its batch is 0: each transaction holds the writers' lock, so a
// batch stays short next to the turns and answers other processes write.
const DefaultPurgeBatch = 200

// PurgeRuns removes the finished runs last changed before before, with
// every row that belongs to them, batch runs per transaction (0:
// DefaultPurgeBatch). Which runs go is decided inside each transaction,
// so a run that changed meanwhile (resumed, its delivery retried) is
// kept. What was removed before an error stays removed and is returned.
func (s *Store) PurgeRuns(ctx context.Context, before time.Time, batch int) (Purged, error) {
	if batch <= 0 {
		batch = DefaultPurgeBatch
	}
	var p Purged
	for {
		var ids []string
		var rows int64
		err := s.tx(ctx, func(tx *txn) error {
			ids, rows = nil, 0
			var err error
			ids, err = expiredIDs(ctx, tx, before, s.now(), batch)
			if err != nil || len(ids) == 0 {
				return err
			}
			rows, err = purge(ctx, tx, ids)
			return err
		})
		if err != nil {
			return p, fmt.Errorf("purge runs: %w", err)
		}
		p.Runs = append(p.Runs, ids...)
		p.Rows += rows
		if len(ids) < batch {
			return p, nil
		}
		if err := ctx.Err(); err != nil {
			return p, err
		}
	}
}

// expiredIDs reads up to limit runs to remove, in the transaction that
// removes them.
func expiredIDs(ctx context.Context, tx *txn, before, now time.Time, limit int) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT r.id FROM runs r WHERE `+expiredWhere+` LIMIT ?`, nanos(before), nanos(now), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// purge removes the runs ids and their rows, children first (the foreign
// keys are enforced), and returns how many rows went.
func purge(ctx context.Context, tx *txn, ids []string) (int64, error) {
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	var n int64
	exec := func(q string) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		n += k
		return err
	}
	for _, t := range setTables {
		if err := exec(`DELETE FROM ` + t + ` WHERE set_id IN (SELECT id FROM question_sets WHERE run_id IN ` + in + `)`); err != nil {
			return n, fmt.Errorf("%s: %w", t, err)
		}
	}
	for _, t := range append([]string{"question_sets"}, runTables...) {
		if err := exec(`DELETE FROM ` + t + ` WHERE run_id IN ` + in); err != nil {
			return n, fmt.Errorf("%s: %w", t, err)
		}
	}
	if err := exec(`DELETE FROM runs WHERE id IN ` + in); err != nil {
		return n, fmt.Errorf("runs: %w", err)
	}
	return n, nil
}

// EndedDelivery is the delivery of a run that is over, whose worktree was
// removed and whose push is not pending: its branch in the person's
// checkout is all that is left of it there.
type EndedDelivery struct {
	Delivery
	RunStatus RunStatus
	EndedAt   time.Time // the run's last change
}

// EndedDeliveries lists the deliveries of runs that are over, with their
// worktree removed and nothing pending, oldest run first.
func (s *Store) EndedDeliveries(ctx context.Context) ([]EndedDelivery, error) {
	cols := strings.ReplaceAll("d."+deliveryColumns, ", ", ", d.")
	rows, err := s.db.QueryContext(ctx, `SELECT `+cols+`, r.status, r.updated_at FROM deliveries d JOIN runs r ON r.id = d.run_id
		WHERE d.removed_at <> 0 AND d.pending = 0 AND r.status IN ('done', 'failed', 'cancelled', 'stopped')
		ORDER BY r.updated_at, r.id`)
	if err != nil {
		return nil, fmt.Errorf("ended deliveries: %w", err)
	}
	defer rows.Close()
	var out []EndedDelivery
	for rows.Next() {
		var x deliveryScan
		var e EndedDelivery
		var at int64
		if err := rows.Scan(append(x.dest(), &e.RunStatus, &at)...); err != nil {
			return nil, fmt.Errorf("ended deliveries: %w", err)
		}
		e.Delivery, e.EndedAt = x.delivery(), fromNanos(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
