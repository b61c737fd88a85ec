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
	Note      string
	RemovedAt time.Time // when the worktree was removed; zero while it exists
	CreatedAt time.Time
	UpdatedAt time.Time
}

const deliveryColumns = `run_id, repo_dir, worktree, branch, base, base_commit, state, commit_sha, pushed, pr_number, pr_url, commented, note, removed_at, created_at, updated_at`

func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	var pushed, commented int
	var removed, created, updated int64
	err := row.Scan(&d.RunID, &d.RepoDir, &d.Worktree, &d.Branch, &d.Base, &d.BaseCommit, &d.State, &d.CommitSHA,
		&pushed, &d.PRNumber, &d.PRURL, &commented, &d.Note, &removed, &created, &updated)
	if err != nil {
		return Delivery{}, err
	}
	d.Pushed, d.Commented = pushed != 0, commented != 0
	d.RemovedAt, d.CreatedAt, d.UpdatedAt = fromNanos(removed), fromNanos(created), fromNanos(updated)
	return d, nil
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
	_, err := s.db.ExecContext(ctx, `INSERT INTO deliveries (`+deliveryColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(run_id) DO UPDATE SET repo_dir = excluded.repo_dir, worktree = excluded.worktree, branch = excluded.branch,
			base = excluded.base, base_commit = excluded.base_commit, state = excluded.state, commit_sha = excluded.commit_sha,
			pushed = excluded.pushed, pr_number = excluded.pr_number, pr_url = excluded.pr_url, commented = excluded.commented,
			note = excluded.note, removed_at = excluded.removed_at, updated_at = excluded.updated_at`,
		d.RunID, d.RepoDir, d.Worktree, d.Branch, d.Base, d.BaseCommit, d.State, d.CommitSHA, boolInt(d.Pushed),
		d.PRNumber, d.PRURL, boolInt(d.Commented), d.Note, nanos(d.RemovedAt), nanos(d.CreatedAt), nanos(now))
	if err != nil {
		return fmt.Errorf("save delivery of run %s: %w", d.RunID, err)
	}
	return nil
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
		var pushed, commented int
		var removed, created, updated int64
		var r Run
		var surfaces, options string
		var rc, ru int64
		d := &k.Delivery
		if err := rows.Scan(&d.RunID, &d.RepoDir, &d.Worktree, &d.Branch, &d.Base, &d.BaseCommit, &d.State, &d.CommitSHA,
			&pushed, &d.PRNumber, &d.PRURL, &commented, &d.Note, &removed, &created, &updated,
			&r.ID, &r.Spec, &r.Title, &r.Prompt, &r.WorkDir, &surfaces, &options, &r.Status,
			&r.SessionID, &r.Error, &r.FinalText, &r.CostUSD, &rc, &ru, &r.Host); err != nil {
			return nil, fmt.Errorf("kept worktrees: %w", err)
		}
		d.Pushed, d.Commented = pushed != 0, commented != 0
		d.RemovedAt, d.CreatedAt, d.UpdatedAt = fromNanos(removed), fromNanos(created), fromNanos(updated)
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
}

// DecisionLog returns every question of a run, in the order asked, with its
// answer: the run's decision log, read from the stored question sets and
// answers.
func (s *Store) DecisionLog(ctx context.Context, runID string) ([]Decision, error) {
	sets, err := s.QuestionSets(ctx, SetFilter{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("decision log of run %s: %w", runID, err)
	}
	var out []Decision
	for _, rec := range sets {
		for _, q := range rec.Set.Questions {
			d := Decision{SetID: rec.Set.ID, QuestionID: q.ID, Turn: rec.Set.Turn, Header: q.Header, Question: q.Text,
				State: rec.State, AskedAt: rec.CreatedAt}
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
