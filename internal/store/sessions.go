package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
)

// The agent CLI keeps a session's record (its JSONL file) on the machine
// that ran the turn. So that any instance of a shared store can resume a
// run, the runner saves the file here after every turn and writes it back
// before a turn that resumes the session on a machine that lacks it
// (SaveSession, Session). The content is kept gzip-compressed: a session
// record is text that repeats itself.

// maxSessionBytes bounds a session record the store keeps (uncompressed): a
// larger one is refused with an error naming its size, not cut.
const maxSessionBytes = 256 << 20

// SaveSession stores the record of the agent CLI's session sessionID of run
// runID, replacing the one stored before.
func (s *Store) SaveSession(ctx context.Context, runID, sessionID string, content []byte) error {
	if len(content) > maxSessionBytes {
		return fmt.Errorf("save session %s of run %s: %d bytes, more than the %d the store keeps", sessionID, runID, len(content), maxSessionBytes)
	}
	var buf bytes.Buffer
	// BestSpeed: a session record is saved at the end of every turn, on
	// the way from the CLI's exit to the next step; the default level
	// costs several times the CPU (and its larger tables the page faults
	// of a fresh process) for a few percent less.
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	if _, err := zw.Write(content); err != nil {
		return fmt.Errorf("save session %s of run %s: %w", sessionID, runID, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("save session %s of run %s: %w", sessionID, runID, err)
	}
	now := nanos(s.now())
	err := s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (run_id, session_id, content, size, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(run_id, session_id) DO UPDATE SET content = excluded.content, size = excluded.size, updated_at = excluded.updated_at`,
			runID, sessionID, buf.Bytes(), len(content), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("save session %s of run %s: %w", sessionID, runID, err)
	}
	return nil
}

// Session returns the stored record of session sessionID of run runID; ok
// is false when none is stored.
func (s *Store) Session(ctx context.Context, runID, sessionID string) (content []byte, ok bool, err error) {
	var z []byte
	var size int64
	err = s.db.QueryRowContext(ctx, `SELECT content, size FROM sessions WHERE run_id = ? AND session_id = ?`, runID, sessionID).Scan(&z, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("session %s of run %s: %w", sessionID, runID, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, false, fmt.Errorf("session %s of run %s: stored record is damaged: %w", sessionID, runID, err)
	}
	content, err = io.ReadAll(io.LimitReader(zr, maxSessionBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("session %s of run %s: stored record is damaged: %w", sessionID, runID, err)
	}
	if int64(len(content)) != size {
		return nil, false, fmt.Errorf("session %s of run %s: stored record is %d bytes, %d were saved", sessionID, runID, len(content), size)
	}
	return content, true, nil
}
