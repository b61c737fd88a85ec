package store

import (
	"context"
	"fmt"
)

// The reads of this file take many rows at once, for the commands that
// look at everything (status): one statement per kind of thing, whatever
// the number of runs.

// loadSets returns the question sets matching where (a condition on
// question_sets with args), oldest first, with their answers: two
// statements.
func loadSets(ctx context.Context, q querier, where string, args []any) ([]SetRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+setColumns+` FROM question_sets WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("question sets: %w", err)
	}
	out := []SetRecord{}
	for rows.Next() {
		r, err := scanSet(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("question sets: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	rows, err = q.QueryContext(ctx, `SELECT set_id, question_id, body, answered_by, surface, at FROM answers
		WHERE set_id IN (SELECT id FROM question_sets WHERE `+where+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("answers of question sets: %w", err)
	}
	defer rows.Close()
	bySet := map[string]map[string]answerRow{}
	for rows.Next() {
		var setID, qid string
		r, err := scanAnswerRow(rows, &qid, &setID)
		if err != nil {
			return nil, err
		}
		if bySet[setID] == nil {
			bySet[setID] = map[string]answerRow{}
		}
		bySet[setID][qid] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("answers of question sets: %w", err)
	}
	for i := range out {
		out[i].Response = composeResponse(out[i].Set, bySet[out[i].Set.ID])
	}
	return out, nil
}

// idChunk bounds the IDs of one `IN (…)` list, well under the databases'
// limits on a statement's parameters.
const idChunk = 500

// inChunks calls fn with the IDs in chunks of at most idChunk, as
// arguments and their placeholders.
func inChunks(ids []string, fn func(ph string, args []any) error) error {
	for len(ids) > 0 {
		n := min(len(ids), idChunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		if err := fn(placeholders(n), args); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// RunsByID returns the runs with the given (whole) IDs, by ID; IDs of no
// run are left out. One statement per 500 IDs.
func (s *Store) RunsByID(ctx context.Context, ids []string) (map[string]Run, error) {
	out := map[string]Run{}
	err := inChunks(ids, func(ph string, args []any) error {
		rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id IN (`+ph+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return err
			}
			out[r.ID] = r
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	return out, nil
}

// Deliveries returns the deliveries of the given runs, by run ID; runs
// without one are left out. One statement per 500 IDs.
func (s *Store) Deliveries(ctx context.Context, runIDs []string) (map[string]Delivery, error) {
	out := map[string]Delivery{}
	err := inChunks(runIDs, func(ph string, args []any) error {
		rows, err := s.db.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE run_id IN (`+ph+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out[d.RunID] = d
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return out, nil
}

// RunLeases returns the live leases of all runs, by run ID (RunLease for
// each): none on SQLite.
func (s *Store) RunLeases(ctx context.Context) (map[string]Lease, error) {
	out := map[string]Lease{}
	if !s.Shared() {
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, owner, expires_at FROM run_leases WHERE expires_at > `+pgNowNanos)
	if err != nil {
		return nil, fmt.Errorf("run leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var l Lease
		var exp int64
		if err := rows.Scan(&id, &l.Owner, &exp); err != nil {
			return nil, fmt.Errorf("run leases: %w", err)
		}
		l.ExpiresAt = fromNanos(exp)
		out[id] = l
	}
	return out, rows.Err()
}

// Statements is how many SQL statements this Store has sent, for the
// tests that show a command's reads do not grow with the number of runs
// and what a question round costs: every query and exec, and each write
// transaction's begin and end. The waiters' poller (wait.go), on its own
// connection and timer, is not counted.
func (s *Store) Statements() int64 { return s.db.n.Load() }
