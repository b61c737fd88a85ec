package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A follow-up is feedback on a run, given after its model was done: a
// review comment on the run's pull request, or `orchestrator followup`.
// The runner hands it to the model as the next prompt of the run's own CLI
// session, and delivers the new work to the same branch and pull request.
//
// Exactly once: QueueFollowUp records the feedback under the key of the
// event that brought it (a comment's ID), so the same event twice gives
// one follow-up; BeginTurn claims it in the transaction that records the
// turn carrying it (Turn.FollowUpID), so one turn hands it over; and
// AbandonTurn gives it back when that turn's prompt never reached the
// session.
//
// Which runs take feedback: one that is done (delivered or not), failed
// or stopped goes on (it is queued again, for any instance to drive); one
// still queued, running or waiting keeps it for when its current work is
// over (the loop takes pending follow-ups before it ends the run); a
// cancelled run takes none (ErrFollowUpRefused): cancel means stop for
// good.

// FollowUp is feedback on a run.
type FollowUp struct {
	ID       string
	RunID    string
	EventKey string // the idempotency key of the event that brought it
	Who      string // who gave it, as the surface names them
	Surface  string // where it came from ("github", "cli", …)
	Text     string // as given: untrusted, cleaned when handed to the model
	At       time.Time
	// Turn is the turn that handed it to the model; 0 while pending.
	Turn      int
	CreatedAt time.Time
	ClaimedAt time.Time
}

// ErrFollowUpRefused: the run takes no feedback (it was cancelled).
var ErrFollowUpRefused = errors.New("the run takes no follow-up")

// FollowUpID is the ID of the follow-up recorded under an event key.
func FollowUpID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "fu-" + hex.EncodeToString(h[:6])
}

const followUpColumns = `id, run_id, event_key, who, surface, body, at, created_at, turn, claimed_at`

func scanFollowUp(row interface{ Scan(...any) error }) (FollowUp, error) {
	var f FollowUp
	var at, created, claimed int64
	if err := row.Scan(&f.ID, &f.RunID, &f.EventKey, &f.Who, &f.Surface, &f.Text, &at, &created, &f.Turn, &claimed); err != nil {
		return FollowUp{}, err
	}
	f.At, f.CreatedAt, f.ClaimedAt = fromNanos(at), fromNanos(created), fromNanos(claimed)
	return f, nil
}

// QueueFollowUp records feedback text on run runID from who on surface,
// given at, under the event key key, and in the same transaction queues
// the run again when it had ended (done, failed or stopped), so that an
// instance drives it on. It is idempotent on key: the same key again
// records nothing and returns the follow-up recorded first, with created
// false. A key already used for another run is an error. A cancelled run
// gives ErrFollowUpRefused.
func (s *Store) QueueFollowUp(ctx context.Context, runID, key, who, surface, text string, at time.Time) (f FollowUp, created bool, err error) {
	if runID == "" || strings.TrimSpace(key) == "" {
		return FollowUp{}, false, errors.New("queue follow-up: a run ID and an event key are required")
	}
	if strings.TrimSpace(text) == "" {
		return FollowUp{}, false, fmt.Errorf("queue follow-up on run %s (%s): the feedback is empty", runID, key)
	}
	now := s.now().UTC()
	if at.IsZero() {
		at = now
	}
	f = FollowUp{ID: FollowUpID(key), RunID: runID, EventKey: key, Who: who, Surface: surface, Text: text, At: at.UTC(), CreatedAt: now}
	err = s.tx(ctx, func(tx *txn) error {
		// Touching the run first takes its row lock: a drive that is
		// ending the run (done) commits before or after this whole
		// transaction, never in between (see the runner's follow-up check).
		res, err := tx.ExecContext(ctx, `UPDATE runs SET updated_at = ? WHERE id = ?`, nanos(now), runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("run %s: %w", runID, ErrNotFound)
		}
		var status RunStatus
		if err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, runID).Scan(&status); err != nil {
			return err
		}
		got, err := scanFollowUp(tx.QueryRowContext(ctx, `SELECT `+followUpColumns+` FROM follow_ups WHERE event_key = ?`, key))
		switch {
		case err == nil:
			if got.RunID != runID {
				return fmt.Errorf("event %s already brought feedback to run %s", key, got.RunID)
			}
			f = got
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if status == RunCancelled {
			return fmt.Errorf("run %s was cancelled: %w", runID, ErrFollowUpRefused)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO follow_ups (`+followUpColumns+`) VALUES (?,?,?,?,?,?,?,?,0,0)`,
			f.ID, f.RunID, f.EventKey, f.Who, f.Surface, f.Text, nanos(f.At), nanos(now)); err != nil {
			return err
		}
		created = true
		return requeueForFollowUps(ctx, tx, runID, now)
	})
	if err != nil {
		return FollowUp{}, false, fmt.Errorf("queue follow-up on run %s: %w", runID, err)
	}
	if created {
		s.Poke() // the instances look for work
	}
	return f, created, nil
}

// requeueForFollowUps queues run runID again when it has ended (but for a
// cancel) and has a pending follow-up.
func requeueForFollowUps(ctx context.Context, tx *txn, runID string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, error = '', updated_at = ?
		WHERE id = ? AND status IN (?, ?, ?)
		AND EXISTS (SELECT 1 FROM follow_ups f WHERE f.run_id = runs.id AND f.turn = 0)`,
		RunQueued, nanos(now), runID, RunDone, RunFailed, RunStopped)
	return err
}

// RequeueForFollowUps queues run runID again when it has ended (done,
// failed or stopped) with a follow-up still pending: a drive calls it
// after it ended the run, for feedback that came while it ran (the
// follow-up's own transaction found the run not ended yet). It reports
// whether the run was queued.
func (s *Store) RequeueForFollowUps(ctx context.Context, runID string) (bool, error) {
	// Most runs end with no feedback: one read, no write. A follow-up
	// whose transaction commits after this read found the run ended (its
	// transaction takes the run's row first) and queued it itself.
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM follow_ups WHERE run_id = ? AND turn = 0`, runID).Scan(&n); err != nil {
		return false, fmt.Errorf("requeue run %s for its follow-ups: %w", runID, err)
	}
	if n == 0 {
		return false, nil
	}
	queued := false
	err := s.tx(ctx, func(tx *txn) error {
		if err := requeueForFollowUps(ctx, tx, runID, s.now().UTC()); err != nil {
			return err
		}
		var status RunStatus
		if err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, runID).Scan(&status); err != nil {
			return err
		}
		queued = status == RunQueued
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("requeue run %s for its follow-ups: %w", runID, err)
	}
	if queued {
		s.Poke()
	}
	return queued, nil
}

// PendingFollowUp returns the oldest follow-up of run runID that no turn
// has handed over yet; ok is false when there is none.
func (s *Store) PendingFollowUp(ctx context.Context, runID string) (f FollowUp, ok bool, err error) {
	f, err = scanFollowUp(s.db.QueryRowContext(ctx, `SELECT `+followUpColumns+` FROM follow_ups
		WHERE run_id = ? AND turn = 0 ORDER BY created_at, id LIMIT 1`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return FollowUp{}, false, nil
	}
	if err != nil {
		return FollowUp{}, false, fmt.Errorf("pending follow-up of run %s: %w", runID, err)
	}
	return f, true, nil
}

// FollowUps returns the follow-ups of run runID, oldest first.
func (s *Store) FollowUps(ctx context.Context, runID string) ([]FollowUp, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+followUpColumns+` FROM follow_ups WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("follow-ups of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []FollowUp
	for rows.Next() {
		f, err := scanFollowUp(rows)
		if err != nil {
			return nil, fmt.Errorf("follow-ups of run %s: %w", runID, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// FollowUpByKey returns the follow-up recorded under an event key; ok is
// false when there is none.
func (s *Store) FollowUpByKey(ctx context.Context, key string) (f FollowUp, ok bool, err error) {
	f, err = scanFollowUp(s.db.QueryRowContext(ctx, `SELECT `+followUpColumns+` FROM follow_ups WHERE event_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return FollowUp{}, false, nil
	}
	if err != nil {
		return FollowUp{}, false, fmt.Errorf("follow-up %s: %w", key, err)
	}
	return f, true, nil
}

// claimFollowUp marks follow-up id of run runID handed over by turn seq,
// in the transaction of BeginTurn; one that is not pending any more gives
// ErrNotClaimable.
func claimFollowUp(ctx context.Context, tx *txn, runID, id string, seq int, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE follow_ups SET turn = ?, claimed_at = ? WHERE id = ? AND run_id = ? AND turn = 0`,
		seq, nanos(now), id, runID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("claim follow-up %s: %w", id, ErrNotClaimable)
	}
	return nil
}

// unclaimFollowUps gives back the follow-up turn seq of run runID carried
// (AbandonTurn: its prompt never reached the session).
func unclaimFollowUps(ctx context.Context, tx *txn, runID string, seq int) error {
	_, err := tx.ExecContext(ctx, `UPDATE follow_ups SET turn = 0, claimed_at = 0 WHERE run_id = ? AND turn = ?`, runID, seq)
	return err
}

// ReopenDelivery makes the delivery of a run that goes on after feedback
// deliver again, to the same branch and pull request: a delivery that had
// gone past its commit (committed, pushed, opened) or found nothing to
// commit goes back to prepared, its worktree to be found again or added
// again (from the branch: its last commit stays recorded as work to go on
// from, pushed when it was), its pull request kept. It reports whether the
// delivery was reopened; one still prepared, or none, is left as it is.
func (s *Store) ReopenDelivery(ctx context.Context, runID string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE deliveries SET
			pushed = CASE WHEN state IN (?, ?) THEN pushed ELSE 0 END,
			commit_sha = CASE WHEN state = ? THEN '' ELSE commit_sha END,
			state = ?, removed_at = 0, pending = 0, attempts = 0, next_attempt_at = 0, last_error = '', note = '', updated_at = ?
		WHERE run_id = ? AND state IN (?, ?, ?, ?)`,
		DeliveryPushed, DeliveryOpened, DeliveryUnchanged, DeliveryPrepared, nanos(s.now().UTC()),
		runID, DeliveryCommitted, DeliveryPushed, DeliveryOpened, DeliveryUnchanged)
	if err != nil {
		return false, fmt.Errorf("reopen the delivery of run %s: %w", runID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// prOfRepo reports whether a pull request's page (Delivery.PRURL,
// https://HOST/OWNER/NAME/pull/N) is in repo ("owner/name").
func prOfRepo(prURL, repo string) bool {
	return strings.Contains(strings.ToLower(prURL), "/"+strings.ToLower(repo)+"/pull/")
}

// RunOfPullRequest returns the run whose delivery opened pull request
// number of repo ("owner/name"); "" when none did.
func (s *Store) RunOfPullRequest(ctx context.Context, repo string, number int) (string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, pr_url FROM deliveries WHERE pr_number = ? ORDER BY created_at DESC`, number)
	if err != nil {
		return "", fmt.Errorf("the run of pull request %s#%d: %w", repo, number, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, u string
		if err := rows.Scan(&id, &u); err != nil {
			return "", fmt.Errorf("the run of pull request %s#%d: %w", repo, number, err)
		}
		if prOfRepo(u, repo) {
			return id, nil
		}
	}
	return "", rows.Err()
}

// RunPullRequests returns the numbers of the pull requests of repo that
// runs opened and that may still get feedback: of runs not cancelled,
// changed within the last since.
func (s *Store) RunPullRequests(ctx context.Context, repo string, since time.Time) ([]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT d.pr_number, d.pr_url FROM deliveries d JOIN runs r ON r.id = d.run_id
		WHERE d.pr_number > 0 AND r.status <> ? AND r.updated_at >= ? ORDER BY d.pr_number`, RunCancelled, nanos(since))
	if err != nil {
		return nil, fmt.Errorf("the runs' pull requests of %s: %w", repo, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		var u string
		if err := rows.Scan(&n, &u); err != nil {
			return nil, fmt.Errorf("the runs' pull requests of %s: %w", repo, err)
		}
		if prOfRepo(u, repo) {
			out = append(out, n)
		}
	}
	return out, rows.Err()
}
