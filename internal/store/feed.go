package store

import (
	"context"
	"fmt"
)

// The set feed: every question set carries seq, the feed position of its
// last change. Each change of a set's state or answers, and each change of
// its run's status while the set is pending or answered, moves the set to a
// new position, one higher than any before, in the transaction of the
// change. So a process watching many sets reads, at each change, the sets
// above the last position it saw (one indexed query, SetFeed) instead of
// re-reading every set it waits on.
//
// Positions are given in commit order: a reader that has seen position N
// has seen every change committed with a position at or below N. The next
// position is MAX(seq)+1 read in the write transaction (the unique index
// question_sets_seq makes it a look at the index's last entry), so two
// writers must never compute it at once:
//   - on SQLite a write transaction is BEGIN IMMEDIATE, which holds the
//     database's one write lock until it ends: writers are serialised;
//   - on PostgreSQL nextSeq takes the transaction advisory lock of the
//     store's writers (pgDialect.lockKey("write"), the lock begin takes:
//     taking it again in the same transaction is granted at once) before
//     it reads MAX(seq). The lock is let go only after the commit is
//     visible, and the next writer's statements, in read committed, see
//     that commit: the next writer's positions are above it, and it commits
//     after. A sequence would not do: nextval hands out numbers in the
//     order transactions ask, not the order they commit, so a reader could
//     see 8 committed while 7 is still to commit, move past 7 and never see
//     it.
//
// Several sets changed in one transaction get a position each (never one
// shared), so a reader paging the feed by a limit never stops between two
// sets of one position.

// SetChange is a question set as the set feed reports it.
type SetChange struct {
	Seq       int64 // the feed position of the set's last change
	SetID     string
	RunID     string
	Spec      string // the run's spec ("" when none)
	State     SetState
	RunStatus RunStatus
}

// setChangeColumns are SetChange's columns, of question_sets qs joined to
// runs r.
const setChangeColumns = `qs.seq, qs.id, qs.run_id, r.spec, qs.state, r.status
	FROM question_sets qs JOIN runs r ON r.id = qs.run_id`

// The feed's queries (feed_test.go shows their plans).
const (
	setFeedQuery     = `SELECT ` + setChangeColumns + ` WHERE qs.seq > ? ORDER BY qs.seq LIMIT ?`
	setFeedHeadQuery = `SELECT COALESCE(MAX(seq), 0) FROM question_sets`
	waitingSetsQuery = `SELECT ` + setChangeColumns + ` WHERE qs.state = ? AND qs.id > ? AND r.status = ? ORDER BY qs.id LIMIT ?`
)

func scanSetChanges(ctx context.Context, q querier, query string, args ...any) ([]SetChange, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SetChange
	for rows.Next() {
		var c SetChange
		if err := rows.Scan(&c.Seq, &c.SetID, &c.RunID, &c.Spec, &c.State, &c.RunStatus); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// SetFeed returns, by position, at most limit sets whose last change has a position above after.
func (s *Store) SetFeed(ctx context.Context, after int64, limit int) ([]SetChange, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("set feed: limit %d is not positive", limit)
	}
	out, err := scanSetChanges(ctx, s.db, setFeedQuery, after, limit)
	if err != nil {
		return nil, fmt.Errorf("set feed after %d: %w", after, err)
	}
	return out, nil
}

// SetFeedHead is the highest position now (0 on an empty store).
func (s *Store) SetFeedHead(ctx context.Context) (int64, error) {
	var head int64
	if err := s.db.QueryRowContext(ctx, setFeedHeadQuery).Scan(&head); err != nil {
		return 0, fmt.Errorf("set feed head: %w", err)
	}
	return head, nil
}

// WaitingSets lists, by set ID above after (keyset pages), at most limit pending sets of runs whose status is waiting.
func (s *Store) WaitingSets(ctx context.Context, after string, limit int) ([]SetChange, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("waiting sets: limit %d is not positive", limit)
	}
	out, err := scanSetChanges(ctx, s.db, waitingSetsQuery, SetPending, after, RunWaiting, limit)
	if err != nil {
		return nil, fmt.Errorf("waiting sets after %q: %w", after, err)
	}
	return out, nil
}

// nextSeq is the next feed position, for a change in tx (see above: the
// first call of a transaction reads MAX(seq) under the writers' lock, the
// next ones count on from it).
func (t *txn) nextSeq(ctx context.Context) (int64, error) {
	if t.seq == 0 {
		if d, ok := t.d.d.(*pgDialect); ok {
			if _, err := t.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, d.lockKey("write")); err != nil {
				return 0, fmt.Errorf("set feed position: %w", err)
			}
		}
		if err := t.QueryRowContext(ctx, setFeedHeadQuery).Scan(&t.seq); err != nil {
			return 0, fmt.Errorf("set feed position: %w", err)
		}
	}
	t.seq++
	return t.seq, nil
}

// bumpSet moves a set to the next feed position.
func (t *txn) bumpSet(ctx context.Context, id string) error {
	seq, err := t.nextSeq(ctx)
	if err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, `UPDATE question_sets SET seq = ? WHERE id = ?`, seq, id); err != nil {
		return fmt.Errorf("question set %s: feed position: %w", id, err)
	}
	return nil
}

// changeSet runs the update q of the set id and, when it changed the set,
// moves the set to the next feed position.
func (t *txn) changeSet(ctx context.Context, id, q string, args ...any) error {
	res, err := t.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return nil
	}
	return t.bumpSet(ctx, id)
}

// bumpOpenSets moves the run's sets still open (pending or answered) to
// new feed positions, one each: for a change of the run's status, or
// before they expire.
func (t *txn) bumpOpenSets(ctx context.Context, runID string) error {
	rows, err := t.QueryContext(ctx, `SELECT id FROM question_sets WHERE run_id = ? AND state IN (?, ?) ORDER BY id`,
		runID, SetPending, SetAnswered)
	if err != nil {
		return fmt.Errorf("open question sets of run %s: %w", runID, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("open question sets of run %s: %w", runID, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open question sets of run %s: %w", runID, err)
	}
	for _, id := range ids {
		if err := t.bumpSet(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
