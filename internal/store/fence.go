package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Fencing. A run is driven by at most one process anywhere: the holder of
// its lease (cluster.go; on SQLite its file lock). Each take of the lock
// gets a fencing token, one higher than the run's last (run_leases.token:
// the row stays when the lease is given back), and the writes of a turn
// carry it (WithFence): the store checks, in the transaction of the write,
// that the token is still the run's, and refuses the write with
// ErrLeaseLost when another take came since. A process that stalled past
// its lease (stopped, or cut off from the database) and wakes up cannot
// undo what the new holder did. The CLI's hook (and its guard) check the
// token too (CheckFence), so that the CLI of a fenced-out process runs no
// more tool calls.

// ErrLeaseLost reports a write refused because the run's lock was taken
// again since the writer took it: another process drives the run now.
var ErrLeaseLost = errors.New("the run's lease was lost")

type fenceKey struct{}

type fence struct {
	runID string
	token int64
}

// WithFence returns ctx carrying the fencing token of run runID (the
// Lock's Token): the writes of the run's turns made with it are refused
// with ErrLeaseLost once the run's lock was taken again.
func WithFence(ctx context.Context, runID string, token int64) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence{runID: runID, token: token})
}

// checkFence refuses the transaction's writes for run runID when ctx
// carries a fencing token for it that is no longer the run's. On
// PostgreSQL the lease row is share-locked until the transaction ends, so
// that no take of the lease commits between the check and the write.
func (s *Store) checkFence(ctx context.Context, tx *txn, runID string) error {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok || f.runID != runID {
		return nil
	}
	q := `SELECT token FROM run_leases WHERE run_id = ?`
	if s.Shared() {
		q += ` FOR SHARE`
	}
	var token int64
	err := tx.QueryRowContext(ctx, q, runID).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		token = 0
	} else if err != nil {
		return fmt.Errorf("fencing token of run %s: %w", runID, err)
	}
	if token != f.token {
		return fmt.Errorf("run %s: fencing token %d, the run's is %d: %w", runID, f.token, token, ErrLeaseLost)
	}
	return nil
}

// CheckFence returns nil when token is still the fencing token of run
// runID, an error wrapping ErrLeaseLost when the run's lock was taken
// again since (or given back: nothing may act for that take any more).
// The CLI's hook calls it before every tool call.
func (s *Store) CheckFence(ctx context.Context, runID string, token int64) error {
	var cur int64
	var owner string
	err := s.db.QueryRowContext(ctx, `SELECT token, owner FROM run_leases WHERE run_id = ?`, runID).Scan(&cur, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run %s has no lease: %w", runID, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("fencing token of run %s: %w", runID, err)
	}
	if cur != token || owner == "" {
		return fmt.Errorf("run %s: fencing token %d, the run's is %d (held by %q): %w", runID, token, cur, owner, ErrLeaseLost)
	}
	return nil
}

// LeaseState is a run's lease as the hook's guard watches it.
type LeaseState struct {
	Owner string
	Token int64
	// Left is how long the lease lasts unless renewed, by the database's
	// clock (negative: expired). Zero on SQLite, whose file locks do not
	// expire.
	Left int64 // nanoseconds
}

// RunLeaseState reads the lease of run runID as it stands, expired or not.
func (s *Store) RunLeaseState(ctx context.Context, runID string) (LeaseState, error) {
	var l LeaseState
	q := `SELECT owner, token, 0 FROM run_leases WHERE run_id = ?`
	if s.Shared() {
		q = `SELECT owner, token, expires_at - ` + pgNowNanos + ` FROM run_leases WHERE run_id = ?`
	}
	err := s.db.QueryRowContext(ctx, q, runID).Scan(&l.Owner, &l.Token, &l.Left)
	if errors.Is(err, sql.ErrNoRows) {
		return LeaseState{}, nil
	}
	if err != nil {
		return LeaseState{}, fmt.Errorf("lease of run %s: %w", runID, err)
	}
	return l, nil
}

// takeToken records a take of run runID's lock by this process on SQLite
// (the file lock decides; the row only carries the token) and returns the
// take's token (0 for a run not in the store).
func (s *Store) takeToken(ctx context.Context, runID string) (int64, error) {
	ctx = Lazy(ctx) // every process of a SQLite store is on this machine (sqlite.go)
	var token int64
	err := s.tx(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, `INSERT INTO run_leases (run_id, owner, expires_at, token)
			SELECT id, ?, 0, 1 FROM runs WHERE id = ?
			ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires_at = 0, token = run_leases.token + 1
			RETURNING token`, s.instance, runID).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // no such run: no write of it to fence
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fencing token of run %s: %w", runID, err)
	}
	return token, nil
}

// ToolCallRecord is a tool call of a turn as the CLI's hooks recorded it:
// started before the tool ran, finished once its result was back.
type ToolCallRecord struct {
	ToolUseID string
	Tool      string
	Input     string // what the call does, on one line (its command, its file)
	Token     int64
	Finished  bool
	Result    string // its output, as the hook got it, cut at maxToolResult
}

// maxToolResult bounds the output of a tool call the store keeps.
const maxToolResult = 8 << 10

// ToolCallStarted records, before the tool runs, that the CLI of the take
// token of run runID's lock runs tool call toolUseID; it fails with
// ErrLeaseLost when token is not the run's any more (the call must not
// run). again is true when the call was recorded before: a CLI that
// resumed the session asks to run a call an earlier process of it started,
// whose outcome is unknown here; it must not run twice.
func (s *Store) ToolCallStarted(ctx context.Context, runID, toolUseID, tool, input string, token int64) (again bool, err error) {
	ctx = WithFence(ctx, runID, token)
	err = s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO turn_tool_calls (run_id, tool_use_id, tool, input, token, started_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, tool_use_id) DO NOTHING`, runID, toolUseID, tool, cut(input, maxToolResult), token, nanos(s.now()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		again = n == 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record tool call %s of run %s: %w", toolUseID, runID, err)
	}
	return again, nil
}

// ToolCallFinished records that tool call toolUseID of run runID has its
// result (cut at maxToolResult bytes).
func (s *Store) ToolCallFinished(ctx context.Context, runID, toolUseID, result string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE turn_tool_calls SET finished_at = ?, result = ? WHERE run_id = ? AND tool_use_id = ?`,
		nanos(s.now()), cut(result, maxToolResult), runID, toolUseID)
	if err != nil {
		return fmt.Errorf("record the result of tool call %s of run %s: %w", toolUseID, runID, err)
	}
	return nil
}

// ToolCallsOf lists the tool calls the hooks recorded for run runID, in
// the order they started.
func (s *Store) ToolCallsOf(ctx context.Context, runID string) ([]ToolCallRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tool_use_id, tool, input, token, finished_at, result FROM turn_tool_calls WHERE run_id = ?
		ORDER BY started_at, tool_use_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("tool calls of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []ToolCallRecord
	for rows.Next() {
		var c ToolCallRecord
		var fin int64
		if err := rows.Scan(&c.ToolUseID, &c.Tool, &c.Input, &c.Token, &fin, &c.Result); err != nil {
			return nil, fmt.Errorf("tool calls of run %s: %w", runID, err)
		}
		c.Finished = fin != 0
		out = append(out, c)
	}
	return out, rows.Err()
}

// giveBackToken marks this process's take token of run runID's lock given
// back (SQLite): its token fences nothing in any more.
func (s *Store) giveBackToken(runID string, token int64) error {
	ctx, cancel := context.WithTimeout(Lazy(context.Background()), 15*time.Second)
	defer cancel()
	_, err := s.db.ExecContext(ctx, `UPDATE run_leases SET owner = '' WHERE run_id = ? AND owner = ? AND token = ?`, runID, s.instance, token)
	if err != nil {
		return fmt.Errorf("give back the lock of run %s: %w", runID, err)
	}
	return nil
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
