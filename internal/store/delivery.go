package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DeliveryState is how far the delivery of a run's work has come. Each step
// is recorded once done, so that a process that dies between two steps is
// replaced by one that goes on from the next (internal/delivery).
type DeliveryState string

// Delivery states, in order.
const (
	DeliveryPrepared  DeliveryState = "prepared"  // the worktree and branch exist
	DeliveryUnchanged DeliveryState = "unchanged" // the run ended with nothing to commit
	DeliveryCommitted DeliveryState = "committed" // CommitSHA is on the branch
	DeliveryPushed    DeliveryState = "pushed"    // the branch is on the remote
	DeliveryOpened    DeliveryState = "opened"    // the pull request is open (PRNumber)
)

// Delivery is where a run's work is delivered through git: its worktree,
// branch, commit, push and pull request.
type Delivery struct {
	RunID      string
	RepoDir    string // the person's checkout the worktree was added from
	Worktree   string // the run's own worktree, under the state directory
	Branch     string
	Base       string // the branch the run's branch starts from
	BaseCommit string
	State      DeliveryState
	CommitSHA  string
	Pushed     bool
	PRNumber   int
	PRURL      string
	// Commented is set once the run's question issue got its comment
	// linking the pull request.
	Commented bool
	// Note says what happened, for people ("no change: nothing to commit").
	Note string
	// Pending is set when the run ended with its delivery not finished: a
	// push or a pull request that still failed after its retries. The run
	// is done; serve tries again at NextAttemptAt, and `resume RUN` at
	// once. Attempts counts the attempts that failed, LastError says why
	// the last one did.
	Pending       bool
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	RemovedAt     time.Time // when the worktree was removed; zero while it exists
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

const deliveryColumns = `run_id, repo_dir, worktree, branch, base, base_commit, state, commit_sha, pushed, pr_number, pr_url, commented, note, removed_at, created_at, updated_at, pending, attempts, next_attempt_at, last_error`

// deliveryScan is a row of deliveryColumns being scanned.
type deliveryScan struct {
	d                                  Delivery
	pushed, commented, pending         int
	removed, created, updated, nextAtt int64
}

func (x *deliveryScan) dest() []any {
	d := &x.d
	return []any{&d.RunID, &d.RepoDir, &d.Worktree, &d.Branch, &d.Base, &d.BaseCommit, &d.State, &d.CommitSHA,
		&x.pushed, &d.PRNumber, &d.PRURL, &x.commented, &d.Note, &x.removed, &x.created, &x.updated,
		&x.pending, &d.Attempts, &x.nextAtt, &d.LastError}
}

func (x *deliveryScan) delivery() Delivery {
	d := x.d
	d.Pushed, d.Commented, d.Pending = x.pushed != 0, x.commented != 0, x.pending != 0
	d.RemovedAt, d.CreatedAt, d.UpdatedAt = fromNanos(x.removed), fromNanos(x.created), fromNanos(x.updated)
	d.NextAttemptAt = fromNanos(x.nextAtt)
	return d
}

func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var x deliveryScan
	if err := row.Scan(x.dest()...); err != nil {
		return Delivery{}, err
	}
	return x.delivery(), nil
}

// Delivery returns the delivery of a run; ok is false when it has none.
func (s *Store) Delivery(ctx context.Context, runID string) (d Delivery, ok bool, err error) {
	d, err = scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE run_id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("delivery of run %s: %w", runID, err)
	}
	return d, true, nil
}

// SaveDelivery stores d as the delivery of its run, replacing what was
// stored before.
func (s *Store) SaveDelivery(ctx context.Context, d Delivery) error {
	if d.RunID == "" || d.Worktree == "" || d.Branch == "" || d.State == "" {
		return errors.New("save delivery: run ID, worktree, branch and state are required")
	}
	now := s.now().UTC()
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO deliveries (`+deliveryColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(run_id) DO UPDATE SET repo_dir = excluded.repo_dir, worktree = excluded.worktree, branch = excluded.branch,
			base = excluded.base, base_commit = excluded.base_commit, state = excluded.state, commit_sha = excluded.commit_sha,
			pushed = excluded.pushed, pr_number = excluded.pr_number, pr_url = excluded.pr_url, commented = excluded.commented,
			note = excluded.note, removed_at = excluded.removed_at, updated_at = excluded.updated_at,
			pending = excluded.pending, attempts = excluded.attempts, next_attempt_at = excluded.next_attempt_at,
			last_error = excluded.last_error`,
		d.RunID, d.RepoDir, d.Worktree, d.Branch, d.Base, d.BaseCommit, d.State, d.CommitSHA, boolInt(d.Pushed),
		d.PRNumber, d.PRURL, boolInt(d.Commented), d.Note, nanos(d.RemovedAt), nanos(d.CreatedAt), nanos(now),
		boolInt(d.Pending), d.Attempts, nanos(d.NextAttemptAt), d.LastError)
	if err != nil {
		return fmt.Errorf("save delivery of run %s: %w", d.RunID, err)
	}
	return nil
}

// PendingDeliveries returns the deliveries left pending (Delivery.Pending)
// whose next attempt is due at or before due, the earliest due first.
func (s *Store) PendingDeliveries(ctx context.Context, due time.Time) ([]Delivery, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries
		WHERE pending = 1 AND next_attempt_at <= ? ORDER BY next_attempt_at, run_id`, nanos(due))
	if err != nil {
		return nil, fmt.Errorf("pending deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("pending deliveries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// KeptWorktree is a worktree still on disk, with the run it belongs to.
type KeptWorktree struct {
	Delivery Delivery
	Run      Run
}

// KeptWorktrees returns the deliveries whose worktree was not removed,
// oldest run first.
func (s *Store) KeptWorktrees(ctx context.Context) ([]KeptWorktree, error) {
	cols := strings.ReplaceAll("d."+deliveryColumns, ", ", ", d.")
	rcols := strings.ReplaceAll("r."+runColumns, ", ", ", r.")
	rows, err := s.db.QueryContext(ctx, `SELECT `+cols+`, `+rcols+` FROM deliveries d JOIN runs r ON r.id = d.run_id
		WHERE d.removed_at = 0 ORDER BY r.created_at, r.id`)
	if err != nil {
		return nil, fmt.Errorf("kept worktrees: %w", err)
	}
	defer rows.Close()
	var out []KeptWorktree
	for rows.Next() {
		var k KeptWorktree
		var x deliveryScan
		var r Run
		var surfaces, options string
		var rc, ru int64
		dest := append(x.dest(), &r.ID, &r.Spec, &r.Title, &r.Prompt, &r.WorkDir, &surfaces, &options, &r.Status,
			&r.SessionID, &r.Error, &r.FinalText, &r.CostUSD, &rc, &ru, &r.Host)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("kept worktrees: %w", err)
		}
		k.Delivery = x.delivery()
		r.CreatedAt, r.UpdatedAt = fromNanos(rc), fromNanos(ru)
		k.Run = r
		out = append(out, k)
	}
	return out, rows.Err()
}

// Decision is one entry of a run's decision log: a question the model asked
// and, once given, the answer, who gave it, on which surface and when.
type Decision struct {
	SetID      string
	QuestionID string
	Turn       int
	Header     string
	Question   string
	Options    []string // the options' labels
	// Answer is the chosen labels joined with ", ", then the free text;
	// empty while unanswered.
	Answer     string
	By         string
	Surface    string
	State      SetState
	AskedAt    time.Time
	AnsweredAt time.Time
	// Shared are the shared decisions (AnswerGroup) that answered the
	// question together with the same question in other runs.
	Shared []SharedDecision
}

// DecisionLog returns every question of a run, in the order asked, with its
// answer: the run's decision log, read from the stored question sets and
// answers.
func (s *Store) DecisionLog(ctx context.Context, runID string) ([]Decision, error) {
	sets, err := s.QuestionSets(ctx, SetFilter{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("decision log of run %s: %w", runID, err)
	}
	shared, err := sharedDecisions(ctx, s.db, runID)
	if err != nil {
		return nil, fmt.Errorf("decision log of run %s: %w", runID, err)
	}
	var out []Decision
	for _, rec := range sets {
		for _, q := range rec.Set.Questions {
			d := Decision{SetID: rec.Set.ID, QuestionID: q.ID, Turn: rec.Set.Turn, Header: q.Header, Question: q.Text,
				State: rec.State, AskedAt: rec.CreatedAt, Shared: shared[rec.Set.ID]}
			for _, o := range q.Options {
				d.Options = append(d.Options, o.Label)
			}
			if a, ok := rec.Response.Answer(q.ID); ok {
				parts := append([]string(nil), a.Labels...)
				if a.Text != "" {
					parts = append(parts, a.Text)
				}
				d.Answer = strings.Join(parts, ", ")
				d.By, d.Surface, d.AnsweredAt = rec.Response.By, rec.Response.Surface, rec.Response.At
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// ReleaseRunHost unties a run from host (Run.Host), if it is tied to it:
// what held it there (work in progress that only this machine had) is now
// where every instance finds it.
func (s *Store) ReleaseRunHost(ctx context.Context, id, host string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET host = '' WHERE id = ? AND host = ?`, id, host); err != nil {
		return fmt.Errorf("release the host of run %s: %w", id, err)
	}
	return nil
}

// ErrWorkElsewhere says that what a run needs to go on (its worktree, or
// commits of its branch that its remote does not have) is on another
// instance: that one goes on with it (Run.Host), and the run is left as it
// is here, neither failed nor restarted.
var ErrWorkElsewhere = errors.New("the run's work is on another instance")
