package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Trigger outcomes.
const (
	// TriggerStarted: the event started a run.
	TriggerStarted = "started"
	// TriggerRefused: the event came from someone not allowed to start
	// runs (answered once with a reply).
	TriggerRefused = "refused"
	// TriggerLimited: the repository had started its runs of the hour.
	TriggerLimited = "limited"
)

// ErrTriggerTaken is returned when an event is recorded already: it
// started its run, or was refused, elsewhere or before.
var ErrTriggerTaken = errors.New("the event is recorded already")

// ErrTriggerLimit is returned by CreateTriggeredRun when the repository
// started as many runs as its limit in the last hour; the event is then
// recorded as TriggerLimited.
var ErrTriggerLimit = errors.New("too many runs started from the repository in the last hour")

// Trigger is an event outside the orchestrator that started a run, or was
// refused.
type Trigger struct {
	// Key names the event whatever delivered it, e.g.
	// "github:acme/webapp:comment:123".
	Key  string
	Repo string
	// Origin says what started the run, for people: "github issue
	// acme/webapp#7 comment 123 by alice".
	Origin    string
	Outcome   string
	RunID     string // the run it started
	CreatedAt time.Time
}

const triggerColumns = `key, repo, origin, outcome, started_run, created_at`

func scanTrigger(row interface{ Scan(...any) error }) (Trigger, error) {
	var t Trigger
	var at int64
	if err := row.Scan(&t.Key, &t.Repo, &t.Origin, &t.Outcome, &t.RunID, &at); err != nil {
		return Trigger{}, err
	}
	t.CreatedAt = fromNanos(at)
	return t, nil
}

// CreateTriggeredRun stores r, a run started by the event t, and the event
// in one transaction, with decisions (comment_decisions: key → value, such
// as the issue the run's questions are asked in), so that one event makes
// one run whatever delivers it, however often, at however many instances.
// An event recorded already gives an error wrapping ErrTriggerTaken and
// stores nothing. When limit > 0 and t.Repo started limit runs in the hour
// before now, the event is recorded as TriggerLimited, no run is made, and
// the error wraps ErrTriggerLimit.
func (s *Store) CreateTriggeredRun(ctx context.Context, r Run, t Trigger, limit int, decisions map[string]string) (Run, error) {
	if r.ID == "" || t.Key == "" {
		return Run{}, errors.New("create triggered run: no run ID or event key")
	}
	if r.Status == "" {
		r.Status = RunRunning
	}
	if len(r.Options) == 0 {
		r.Options = json.RawMessage("{}")
	}
	if r.Surfaces == nil {
		r.Surfaces = []string{}
	}
	surfaces, err := encodeJSON(r.Surfaces)
	if err != nil {
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	now := s.now().UTC()
	r.CreatedAt, r.UpdatedAt = now, now
	limited := false
	err = s.tx(ctx, func(tx *txn) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM triggers WHERE key = ?`, t.Key).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrTriggerTaken
		}
		outcome, runID := TriggerStarted, r.ID
		if limit > 0 {
			var started int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM triggers WHERE repo = ? AND outcome = ? AND created_at > ?`,
				t.Repo, TriggerStarted, nanos(now.Add(-time.Hour))).Scan(&started); err != nil {
				return err
			}
			if started >= limit {
				outcome, runID, limited = TriggerLimited, "", true
			}
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO triggers (`+triggerColumns+`) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			t.Key, t.Repo, t.Origin, outcome, runID, nanos(now))
		if err != nil {
			return err
		}
		if k, err := res.RowsAffected(); err != nil {
			return err
		} else if k == 0 {
			return ErrTriggerTaken // recorded meanwhile by another instance
		}
		if limited {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.ID, r.Spec, r.Title, r.Prompt, r.WorkDir, surfaces, string(r.Options), r.Status,
			r.SessionID, r.Error, r.FinalText, r.CostUSD, nanos(now), nanos(now), r.Host); err != nil {
			return err
		}
		for k, v := range decisions {
			if _, err := tx.ExecContext(ctx, `INSERT INTO comment_decisions (key, decision, decided_at) VALUES (?,?,?) ON CONFLICT (key) DO NOTHING`,
				k, v, nanos(now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("create run %s for %s: %w", r.ID, t.Key, err)
	}
	if limited {
		return Run{}, fmt.Errorf("create run for %s: %w", t.Key, ErrTriggerLimit)
	}
	if r.Status == RunQueued {
		s.Poke() // the instances look for work
	}
	return r, nil
}

// RecordTrigger records an event that starts no run (outcome
// TriggerRefused, say). It reports whether this call recorded it: false
// when the event was recorded already (here or by another instance), so
// that whatever follows the event (one reply) happens once.
func (s *Store) RecordTrigger(ctx context.Context, t Trigger) (bool, error) {
	if t.Key == "" || t.Outcome == "" {
		return false, errors.New("record an event: no key or outcome")
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO triggers (`+triggerColumns+`) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
		t.Key, t.Repo, t.Origin, t.Outcome, t.RunID, nanos(s.now().UTC()))
	if err != nil {
		return false, fmt.Errorf("record event %s: %w", t.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record event %s: %w", t.Key, err)
	}
	return n > 0, nil
}

// TriggerOf returns the event that started run id; false when none did.
func (s *Store) TriggerOf(ctx context.Context, runID string) (Trigger, bool, error) {
	if runID == "" {
		return Trigger{}, false, nil
	}
	t, err := scanTrigger(s.db.QueryRowContext(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE started_run = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Trigger{}, false, nil
	}
	if err != nil {
		return Trigger{}, false, fmt.Errorf("the event that started run %s: %w", runID, err)
	}
	return t, true, nil
}

// TriggerByKey returns the event recorded under key; false when none is.
func (s *Store) TriggerByKey(ctx context.Context, key string) (Trigger, bool, error) {
	t, err := scanTrigger(s.db.QueryRowContext(ctx, `SELECT `+triggerColumns+` FROM triggers WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Trigger{}, false, nil
	}
	if err != nil {
		return Trigger{}, false, fmt.Errorf("event %s: %w", key, err)
	}
	return t, true, nil
}
