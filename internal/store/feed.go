package store

import (
	"context"
	"fmt"
)

// The set feed: every question set carries seq, the feed position of its
// last change. Each change of a set — made, answered in part or whole, a
// change of state (claimed, resumed, expired, …) — and each change of its
// run's status while the set is pending or answered, moves the set to a
// new position, one higher than any before, in the statement that makes
// the change. So a process watching many sets reads, at each change, the
// sets above the last position it saw (one indexed query, SetFeed) instead
// of re-reading every set it waits on. To watch every waiting set: read
// the head (SetFeedHead), then page through WaitingSets, then follow
// SetFeed from that head: a change made while paging is in the feed above
// it. A set is in the feed once, as it is now (its last change): a reader
// learns where a set stands, not every step it went through.
//
// The database moves them (migrations …_set_feed.sql), by triggers on
// question_sets (insert, update of state), answers (insert) and runs
// (update of status): no write of the store, of now or to come, can
// forget to, and it costs no statement more. The next position is
// MAX(seq)+1, read where the change is made (the unique index
// question_sets_seq makes it a look at the index's last entry); several
// sets changed at once get a position each, never one shared, so a reader
// paging the feed by a limit never stops between two sets of a position.
//
// Positions are given in commit order: a reader that has seen position N
// has seen every change committed with a position at or below N. For that
// two writers must never compute the next position at once:
//   - on SQLite every write holds the database's one write lock until its
//     commit (a write transaction is BEGIN IMMEDIATE): writers are
//     serialised;
//   - on PostgreSQL the triggers' set_feed_next() takes a transaction
//     advisory lock, fixed per schema, before it reads MAX(seq). The lock
//     is let go only once the commit is visible, and the next writer's
//     read, in read committed, sees that commit: the next writer's
//     positions are above it, and it commits after. (The store's write
//     transactions hold the writers' lock, taken by begin, first, so the
//     feed's lock is always taken second and never waited for while
//     another writer waits for ours.) A sequence would not do: nextval
//     hands out numbers in the order transactions ask, not the order they
//     commit, so a reader could see 8 committed while 7 is still to
//     commit, move past 7 and never see it.

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
