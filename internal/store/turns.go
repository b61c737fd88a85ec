package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TurnKind says why a turn was started.
type TurnKind string

// Turn kinds.
const (
	TurnStart      TurnKind = "start"      // the run's task, first call
	TurnAnswer     TurnKind = "answer"     // carries the answers to a question set
	TurnCorrection TurnKind = "correction" // asks the model to re-emit a malformed QUESTION block
	TurnRetry      TurnKind = "retry"      // the previous turn hit a rate limit: the same prompt again
	TurnContinue   TurnKind = "continue"   // the previous turn was interrupted after its prompt reached the session
	TurnFollowUp   TurnKind = "followup"   // carries feedback given after the run's model was done (followups.go)
)

// Turn is one call of the agent CLI.
type Turn struct {
	RunID  string
	Seq    int // 1, 2, … within the run
	Kind   TurnKind
	Prompt string
	// SetID is the question set whose answers this turn carries (TurnAnswer).
	SetID string
	// FollowUpID is the follow-up a TurnFollowUp carries, claimed by
	// BeginTurn (not stored with the turn: the follow-up names its turn).
	FollowUpID string
	// SessionID is the session the turn runs in: the one resumed, or the
	// one fixed up front with --session-id for a run's first turn.
	SessionID string
	// Resume is true when the turn resumes SessionID rather than creating it.
	Resume         bool
	TranscriptPath string
	// TranscriptDir, when set and TranscriptPath is not, makes BeginTurn
	// name the transcript TranscriptDir/<seq>-<kind>.ndjson (not stored).
	TranscriptDir string
	StartedAt     time.Time
	// Caps, when set, are the spend caps the turn starts under: BeginTurn
	// reserves what it may spend of them (ReservedUSD), or begins nothing
	// (ErrCapReached) when one is reached. BudgetUSD is the turn's own
	// budget (what is left of the run's max_cost_usd; 0: none), the most
	// it reserves. Neither is stored.
	Caps      []CapLimit
	BudgetUSD float64
	// ReservedUSD is what the turn reserved of its caps until it finishes
	// (0: none); its recorded cost then replaces it (spend.go).
	ReservedUSD float64

	Finished   bool
	FinishedAt time.Time
	Result     TurnResult
}

// TurnResult is what a finished turn left.
type TurnResult struct {
	Status        executor.Status   // the executor's outcome status
	Category      executor.Category // the executor's error category (or one below), empty on success
	Error         string
	CostUSD       float64
	InputTokens   int64
	OutputTokens  int64
	NumTurns      int
	QuestionError string // why the turn's QUESTION block(s) could not be read, if so
	SessionID     string
	// FinalText, when set and the turn asked nothing, becomes the run's
	// final text (not stored with the turn).
	FinalText string
}

const turnColumns = `run_id, seq, kind, prompt, set_id, session_id, resume, transcript_path, finished, status, category, error,
	cost_usd, input_tokens, output_tokens, num_turns, question_error, started_at, finished_at, reserved_usd`

func scanTurn(row interface{ Scan(...any) error }) (Turn, error) {
	var t Turn
	var resume, finished int
	var started, fin int64
	err := row.Scan(&t.RunID, &t.Seq, &t.Kind, &t.Prompt, &t.SetID, &t.SessionID, &resume, &t.TranscriptPath, &finished,
		&t.Result.Status, &t.Result.Category, &t.Result.Error, &t.Result.CostUSD, &t.Result.InputTokens, &t.Result.OutputTokens,
		&t.Result.NumTurns, &t.Result.QuestionError, &started, &fin, &t.ReservedUSD)
	if err != nil {
		return Turn{}, err
	}
	t.Resume, t.Finished = resume != 0, finished != 0
	t.StartedAt, t.FinishedAt = fromNanos(started), fromNanos(fin)
	return t, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BeginTurn records a turn about to start and returns it with its Seq set.
// For a TurnAnswer it claims t.SetID in the same transaction (answered →
// resuming), so that the answer is handed to the model by exactly one turn;
// a set that is not answered, or already claimed, gives ErrNotClaimable and
// records nothing. A turn with Caps reserves its budget under them in the
// same transaction (spend.go), or records nothing and gives ErrCapReached.
// The run becomes Running.
func (s *Store) BeginTurn(ctx context.Context, t Turn) (Turn, error) {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, t.RunID); err != nil {
			return err
		}
		if t.Kind == TurnAnswer {
			res, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, claimed_at = ? WHERE id = ? AND run_id = ? AND state = ?`,
				SetResuming, nanos(now), t.SetID, t.RunID, SetAnswered)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("claim question set %s: %w", t.SetID, ErrNotClaimable)
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE run_id = ?`, t.RunID).Scan(&t.Seq); err != nil {
			return err
		}
		if t.FollowUpID != "" {
			if err := claimFollowUp(ctx, tx, t.RunID, t.FollowUpID, t.Seq, now); err != nil {
				return err
			}
		}
		if len(t.Caps) > 0 {
			r, err := reserve(ctx, tx, t.Caps, t.BudgetUSD)
			if err != nil {
				return err
			}
			t.ReservedUSD = r
		}
		t.StartedAt = now
		if t.TranscriptPath == "" && t.TranscriptDir != "" {
			t.TranscriptPath = filepath.Join(t.TranscriptDir, fmt.Sprintf("%03d-%s.ndjson", t.Seq, t.Kind))
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO turns (run_id, seq, kind, prompt, set_id, session_id, resume, transcript_path, started_at, reserved_usd)
			VALUES (?,?,?,?,?,?,?,?,?,?)`, t.RunID, t.Seq, t.Kind, t.Prompt, t.SetID, t.SessionID, boolInt(t.Resume), t.TranscriptPath, nanos(now), t.ReservedUSD)
		if err != nil {
			return err
		}
		return updateRun(ctx, tx, t.RunID, RunUpdate{Status: RunRunning, SessionID: t.SessionID}, now)
	})
	if err != nil {
		return Turn{}, fmt.Errorf("begin turn of run %s: %w", t.RunID, err)
	}
	return t, nil
}

// FinishTurn records how a turn ended, in one transaction with its
// consequences: the set it carried becomes resumed, and the questions it
// asked (asked, when not nil) are stored as a new pending set on the given
// surfaces.
func (s *Store) FinishTurn(ctx context.Context, runID string, seq int, r TurnResult, asked *questions.Set, surfaces []string) error {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		t, err := scanTurn(tx.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE run_id = ? AND seq = ?`, runID, seq))
		if err != nil {
			return err
		}
		if t.Finished {
			return fmt.Errorf("turn %d is already finished", seq)
		}
		_, err = tx.ExecContext(ctx, `UPDATE turns SET finished = 1, status = ?, category = ?, error = ?, cost_usd = ?,
			input_tokens = ?, output_tokens = ?, num_turns = ?, question_error = ?, finished_at = ?, reserved_usd = 0,
			session_id = CASE WHEN ? <> '' THEN ? ELSE session_id END
			WHERE run_id = ? AND seq = ?`,
			string(r.Status), string(r.Category), r.Error, r.CostUSD, r.InputTokens, r.OutputTokens, r.NumTurns, r.QuestionError, nanos(now),
			r.SessionID, r.SessionID, runID, seq)
		if err != nil {
			return err
		}
		if t.SetID != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, resumed_at = ? WHERE id = ? AND state = ?`,
				SetResumed, nanos(now), t.SetID, SetResuming); err != nil {
				return err
			}
		}
		u := RunUpdate{SessionID: r.SessionID, AddCost: r.CostUSD}
		if asked != nil {
			if err := insertSetRows(ctx, tx, *asked, surfaces, now); err != nil {
				return err
			}
			u.Status = RunWaiting // as insertSet does, in the one update below
		}
		if r.FinalText != "" && asked == nil {
			u.FinalText = &r.FinalText
		}
		return updateRun(ctx, tx, runID, u, now)
	})
	if err != nil {
		return fmt.Errorf("finish turn %d of run %s: %w", seq, runID, err)
	}
	return nil
}

// The categories the store gives a turn whose outcome was lost: the run loop
// continues an interrupted turn and sends a not-delivered turn's prompt again.
const (
	// CategoryInterrupted: the outcome was lost but the prompt reached the
	// session (MarkTurnDelivered).
	CategoryInterrupted executor.Category = "interrupted"
	// CategoryNotDelivered: the prompt never reached the session
	// (AbandonTurn).
	CategoryNotDelivered executor.Category = "not_delivered"
)

// MarkTurnDelivered is for a turn whose outcome was lost (the process died
// while it ran) but whose prompt is known to have reached the session: it
// finishes the turn as interrupted and, for an answer turn, marks its set
// resumed, so that the answer is never handed over again.
func (s *Store) MarkTurnDelivered(ctx context.Context, runID string, seq int) error {
	return s.FinishTurn(ctx, runID, seq, TurnResult{Status: executor.StatusIncomplete, Category: CategoryInterrupted,
		Error: "the orchestrator stopped while this turn ran; its prompt had reached the session"}, nil, nil)
}

// AbandonTurn is for a turn whose prompt never reached the session: the turn
// is finished as not delivered and, for an answer turn, the set goes back to
// answered so that the next turn claims it again.
func (s *Store) AbandonTurn(ctx context.Context, runID string, seq int) error {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		t, err := scanTurn(tx.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE run_id = ? AND seq = ?`, runID, seq))
		if err != nil {
			return err
		}
		if t.Finished {
			return fmt.Errorf("turn %d is already finished", seq)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE turns SET finished = 1, status = ?, category = ?,
			error = 'the orchestrator stopped before this turn''s prompt reached the session', finished_at = ?, reserved_usd = 0
			WHERE run_id = ? AND seq = ?`, string(executor.StatusIncomplete), string(CategoryNotDelivered), nanos(now), runID, seq); err != nil {
			return err
		}
		if t.SetID != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, claimed_at = 0 WHERE id = ? AND state = ?`,
				SetAnswered, t.SetID, SetResuming); err != nil {
				return err
			}
		}
		return unclaimFollowUps(ctx, tx, runID, seq)
	})
	if err != nil {
		return fmt.Errorf("abandon turn %d of run %s: %w", seq, runID, err)
	}
	return nil
}

// Turns returns a run's turns in order.
func (s *Store) Turns(ctx context.Context, runID string) ([]Turn, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("turns of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("turns of run %s: %w", runID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// LastTurn returns a run's newest turn; ok is false when it has none.
func (s *Store) LastTurn(ctx context.Context, runID string) (t Turn, ok bool, err error) {
	t, err = scanTurn(s.db.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, false, nil
	}
	if err != nil {
		return Turn{}, false, fmt.Errorf("last turn of run %s: %w", runID, err)
	}
	return t, true, nil
}
