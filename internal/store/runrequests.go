package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// RunRequest names the request a run is made for (an Idempotency-Key of
// the web API, by the person who sent it): the store makes one run per
// person and key, in the transaction that records the key.
type RunRequest struct {
	By         string
	Key        string
	BodySHA256 string // the request's body, to tell a retry from a reuse
}

// ErrRequestReplayed: the run of this request was made before (a retry);
// CreateRun returns it with that run.
var ErrRequestReplayed = errors.New("the run of this request was made before")

// ErrRequestReused: the key was used before for a request with another
// body.
var ErrRequestReused = errors.New("the idempotency key was used before for another request")

// errRequestTaken: another transaction recorded the key first.
var errRequestTaken = errors.New("request key taken")

// createRequested makes run r of request req in one transaction with the
// key's row; a key already recorded gives the run made for it with
// ErrRequestReplayed, or ErrRequestReused if its body differs.
func (s *Store) createRequested(ctx context.Context, r Run, req RunRequest, insert func(context.Context, interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) error) (Run, error) {
	if req.Key == "" || req.BodySHA256 == "" {
		return Run{}, errors.New("create run: a request needs a key and the body's hash")
	}
	err := s.tx(ctx, func(tx *txn) error {
		// The run first: run_requests refers to it. A key recorded
		// already (on PostgreSQL the insert waits for a transaction
		// holding the same key to end; on SQLite writers take turns)
		// rolls the run back.
		if err := insert(ctx, tx); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO run_requests (by_user, key, body_sha256, run_id, created_at) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING`,
			req.By, req.Key, req.BodySHA256, r.ID, nanos(r.CreatedAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errRequestTaken
		}
		return nil
	})
	if errors.Is(err, errRequestTaken) {
		return s.requested(ctx, req)
	}
	if err != nil {
		return Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if r.Status == RunQueued {
		s.Poke() // the instances look for work
	}
	return r, nil
}

// requested returns the run made for req's key, with ErrRequestReplayed,
// or ErrRequestReused when the key came with another body.
func (s *Store) requested(ctx context.Context, req RunRequest) (Run, error) {
	var runID, sum string
	err := s.db.QueryRowContext(ctx, `SELECT run_id, body_sha256 FROM run_requests WHERE by_user = ? AND key = ?`, req.By, req.Key).Scan(&runID, &sum)
	if err != nil {
		return Run{}, fmt.Errorf("read the run of request key %q: %w", req.Key, err)
	}
	if sum != req.BodySHA256 {
		return Run{}, ErrRequestReused
	}
	r, err := s.Run(ctx, runID)
	if err != nil {
		return Run{}, err
	}
	return r, ErrRequestReplayed
}
