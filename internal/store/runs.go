package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// RunStatus is where a run stands.
type RunStatus string

// Run statuses. Queued runs were submitted for any instance of a shared
// store to take (`orchestrator submit`). Running and Waiting runs are "active"; Interrupted runs were
// stopped (shutdown, cancel, crash) and can be resumed; Done, Failed,
// Cancelled and Stopped are final. Stopped: a person chose to stop at the
// run's budget or turn limit (neither a failure nor a cancel).
const (
	RunQueued      RunStatus = "queued"
	RunRunning     RunStatus = "running"
	RunWaiting     RunStatus = "waiting"
	RunInterrupted RunStatus = "interrupted"
	RunDone        RunStatus = "done"
	RunFailed      RunStatus = "failed"
	RunCancelled   RunStatus = "cancelled"
	RunStopped     RunStatus = "stopped"
)

// Final reports whether no more work will happen on a run in this status.
func (s RunStatus) Final() bool {
	return s == RunDone || s == RunFailed || s == RunCancelled || s == RunStopped
}

// Run is one task given to the agent: a spec or a prompt, carried through as
// many turns and question rounds as it needs.
type Run struct {
	ID        string
	Spec      string // the spec's name; empty for a prompt
	Title     string
	Prompt    string
	WorkDir   string
	Surfaces  []string
	Options   json.RawMessage // what the loop needs to resume the run as it was started
	Status    RunStatus
	SessionID string
	Error     string
	FinalText string
	CostUSD   float64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Host is the machine that holds the run's working directory; on a
	// shared store, a run whose work is not delivered through git is
	// driven only by the instances on it.
	Host string
	// Tick, when set, is the schedule tick the run was made for: the store
	// makes one run per spec and tick, whichever instance asks first
	// (CreateRun returns ErrTickTaken to the others). Not read back.
	Tick time.Time
	// Request, when set, is the request the run is made for
	// (runrequests.go): one run per person and key. Not read back.
	Request *RunRequest
}

// ErrTickTaken: another instance made the run of this schedule tick.
var ErrTickTaken = errors.New("the run of this schedule tick was made by another instance")

const runColumns = `id, spec, title, prompt, workdir, surfaces, options, status, session_id, error, final_text, cost_usd, created_at, updated_at, host`

func scanRun(row interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var surfaces, options string
	var created, updated int64
	err := row.Scan(&r.ID, &r.Spec, &r.Title, &r.Prompt, &r.WorkDir, &surfaces, &options, &r.Status,
		&r.SessionID, &r.Error, &r.FinalText, &r.CostUSD, &created, &updated, &r.Host)
	if err != nil {
		return Run{}, err
	}
	if err := json.Unmarshal([]byte(surfaces), &r.Surfaces); err != nil {
		return Run{}, fmt.Errorf("run %s: surfaces: %w", r.ID, err)
	}
	r.Options = json.RawMessage(options)
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	return r, nil
}

// CreateRun stores a new run in status Running. r.ID must be set and unique.
func (s *Store) CreateRun(ctx context.Context, r Run) (Run, error) {
	if r.ID == "" {
		return Run{}, errors.New("create run: no ID")
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
	insert := func(ctx context.Context, q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		_, err := q.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.ID, r.Spec, r.Title, r.Prompt, r.WorkDir, surfaces, string(r.Options), r.Status,
			r.SessionID, r.Error, r.FinalText, r.CostUSD, nanos(now), nanos(now), r.Host)
		return err
	}
	if r.Request != nil {
		return s.createRequested(ctx, r, *r.Request, insert)
	}
	if r.Tick.IsZero() {
		err = insert(ctx, s.db)
	} else {
		// The tick's row and the run in one transaction: the first
		// instance to commit makes the run, the others find the row.
		err = s.tx(ctx, func(tx *txn) error {
			res, err := tx.ExecContext(ctx, `INSERT INTO schedule_ticks (spec, tick, run_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
				r.Spec, nanos(r.Tick), r.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return ErrTickTaken
			}
			return insert(ctx, tx)
		})
	}
	if err != nil {
		return Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if r.Status == RunQueued {
		s.Poke() // the instances look for work
	}
	return r, nil
}

// Run returns the run with the given ID, or an error wrapping ErrNotFound.
// A unique prefix of an ID is accepted too.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	if id == "" {
		return Run{}, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE substr(id, 1, ?) = ? LIMIT 2`, len(id), id)
	if err != nil {
		return Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	defer rows.Close()
	var found []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return Run{}, err
		}
		found = append(found, r)
	}
	if err := rows.Err(); err != nil {
		return Run{}, fmt.Errorf("run %s: %w", id, err)
	}
	switch len(found) {
	case 0:
		return Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	case 1:
		return found[0], nil
	default:
		return Run{}, fmt.Errorf("run %s: %w: more than one run starts with it", id, ErrAmbiguous)
	}
}

// RunFilter selects runs for ListRuns; zero fields match everything.
type RunFilter struct {
	Status []RunStatus
	Spec   string
	Limit  int
	// Brief leaves out the runs' prompts, options, errors and final texts
	// (which may be large), for the looks that only need where runs stand.
	Brief bool
}

// briefRunColumns are runColumns with an empty prompt, options, error and
// final text.
const briefRunColumns = `id, spec, title, '', workdir, surfaces, '{}', status, session_id, '', '', cost_usd, created_at, updated_at, host`

// ListRuns returns runs, newest first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	cols := runColumns
	if f.Brief {
		cols = briefRunColumns
	}
	q := `SELECT ` + cols + ` FROM runs WHERE 1=1`
	var args []any
	if len(f.Status) > 0 {
		q += ` AND status IN (` + placeholders(len(f.Status)) + `)`
		for _, st := range f.Status {
			args = append(args, st)
		}
	}
	if f.Spec != "" {
		q += ` AND spec = ?`
		args = append(args, f.Spec)
	}
	q += ` ORDER BY created_at DESC, id`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func placeholders(n int) string {
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
	}
	return string(b)
}

// RunUpdate changes a run's status and, when set, its other fields.
type RunUpdate struct {
	Status    RunStatus
	SessionID string  // kept when empty
	Error     *string // kept when nil
	FinalText *string // kept when nil
	AddCost   float64
}

// UpdateRun applies u to the run. A final run is never changed again: the
// update returns an error instead.
func (s *Store) UpdateRun(ctx context.Context, id string, u RunUpdate) error {
	return s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, id); err != nil {
			return err
		}
		return updateRun(ctx, tx, id, u, s.now())
	})
}

func updateRun(ctx context.Context, tx *txn, id string, u RunUpdate, now time.Time) error {
	// One statement: the update applies unless it would change the status
	// of a final run (a final run keeps its status; what a turn that was
	// already running when it ended costs is still recorded). Only when
	// nothing was updated is the run read, to say why.
	q := `UPDATE runs SET status = CASE WHEN ? = '' THEN status ELSE ? END, updated_at = ?, cost_usd = cost_usd + ?`
	args := []any{u.Status, u.Status, nanos(now), u.AddCost}
	if u.SessionID != "" {
		q += `, session_id = ?`
		args = append(args, u.SessionID)
	}
	if u.Error != nil {
		q += `, error = ?`
		args = append(args, *u.Error)
	}
	if u.FinalText != nil {
		q += `, final_text = ?`
		args = append(args, *u.FinalText)
	}
	q += ` WHERE id = ? AND (? = '' OR status = ? OR status NOT IN (?, ?, ?, ?))`
	args = append(args, id, u.Status, u.Status, RunDone, RunFailed, RunCancelled, RunStopped)
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("update run %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update run %s: %w", id, err)
	} else if n == 1 {
		return nil
	}
	var status RunStatus
	if err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, id).Scan(&status); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("update run %s: %w", id, ErrNotFound)
		}
		return fmt.Errorf("update run %s: %w", id, err)
	}
	return fmt.Errorf("update run %s: it is already %s", id, status)
}

// MarkScheduled records that the scheduler fired spec at t.
func (s *Store) MarkScheduled(ctx context.Context, spec string, t time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO schedule (spec, last_run) VALUES (?, ?)
		ON CONFLICT(spec) DO UPDATE SET last_run = excluded.last_run`, spec, nanos(t))
	if err != nil {
		return fmt.Errorf("mark %s scheduled: %w", spec, err)
	}
	return nil
}

// LastScheduled returns when the scheduler last fired spec.
func (s *Store) LastScheduled(ctx context.Context, spec string) (time.Time, bool, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT last_run FROM schedule WHERE spec = ?`, spec).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last scheduled %s: %w", spec, err)
	}
	return fromNanos(n), true, nil
}

// CancelRun ends a run for good, in one transaction: it becomes cancelled,
// and its questions that were not handed to the model expire, so no answer
// resumes it any more.
func (s *Store) CancelRun(ctx context.Context, id, reason string) error {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ? WHERE run_id = ? AND state IN (?, ?)`,
			SetExpired, id, SetPending, SetAnswered); err != nil {
			return err
		}
		return updateRun(ctx, tx, id, RunUpdate{Status: RunCancelled, Error: &reason}, now)
	})
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", id, err)
	}
	s.cancels.Add(1) // WakeStamp
	s.changed()
	return nil
}

// SpecCost is what the runs of one spec cost, all together.
type SpecCost struct {
	Spec    string
	Runs    int
	CostUSD float64
	// LastStatus is the status of the spec's newest run.
	LastStatus RunStatus
}

// SpecCosts sums the cost of the runs of each spec (of spec only, when set),
// by spec name.
func (s *Store) SpecCosts(ctx context.Context, spec string) ([]SpecCost, error) {
	q := `SELECT spec, COUNT(*), COALESCE(SUM(cost_usd), 0),
		(SELECT r2.status FROM runs r2 WHERE r2.spec = runs.spec ORDER BY r2.created_at DESC, r2.id LIMIT 1)
		FROM runs WHERE spec <> ''`
	var args []any
	if spec != "" {
		q += ` AND spec = ?`
		args = append(args, spec)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY spec ORDER BY spec`, args...)
	if err != nil {
		return nil, fmt.Errorf("spec costs: %w", err)
	}
	defer rows.Close()
	var out []SpecCost
	for rows.Next() {
		var c SpecCost
		if err := rows.Scan(&c.Spec, &c.Runs, &c.CostUSD, &c.LastStatus); err != nil {
			return nil, fmt.Errorf("spec costs: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
