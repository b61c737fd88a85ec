package store

// TEMPORARY (the lead's branch only): a slow stand-in for the set feed
// until the setfeed branch lands. Deleted at merge.

import (
	"context"
)

// SetChange is a question set as the set feed reports it.
type SetChange struct {
	Seq       int64
	SetID     string
	RunID     string
	Spec      string
	State     SetState
	RunStatus RunStatus
}

const tmpSeq = `MAX(qs.created_at, qs.answered_at, r.updated_at)`

func (s *Store) SetFeed(ctx context.Context, after int64, limit int) ([]SetChange, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tmpSeq+`, qs.id, qs.run_id, r.spec, qs.state, r.status FROM question_sets qs JOIN runs r ON r.id = qs.run_id WHERE `+tmpSeq+` > ? ORDER BY 1 LIMIT ?`, after, limit)
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

func (s *Store) SetFeedHead(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(`+tmpSeq+`), 0) FROM question_sets qs JOIN runs r ON r.id = qs.run_id`).Scan(&n)
	return n, err
}

func (s *Store) WaitingSets(ctx context.Context, after string, limit int) ([]SetChange, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT 0, qs.id, qs.run_id, r.spec, qs.state, r.status FROM question_sets qs JOIN runs r ON r.id = qs.run_id WHERE qs.state = ? AND r.status = ? AND qs.id > ? ORDER BY qs.id LIMIT ?`, SetPending, RunWaiting, after, limit)
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
