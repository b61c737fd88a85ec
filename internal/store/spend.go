package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Spend caps across runs (issue 27; the runner's caps.go): what runs spent
// in a period is the sum of their turns' own costs (each counted once:
// runner/cost.go) by when each turn finished, read from the index
// turns_finished_cost; a cap a person raised by answering Continue at a
// cap question is a row of cap_raises, one per question set, so that an
// answer raises its cap once however often it is carried out.

// CapScopeAll is the scope of the caps on all runs together (limits.*);
// a spec's own cap has the spec's name as its scope.
const CapScopeAll = ""

// Spend is what the turns of the runs of spec ("" or CapScopeAll: of every
// run) that finished in [from, to) cost, in US dollars, and what the
// turns still running reserved of it (their budget, until they finish:
// BeginTurn with Turn.Caps).
func (s *Store) Spend(ctx context.Context, spec string, from, to time.Time) (float64, error) {
	total, err := spend(ctx, s.db, spec, from, to)
	if err != nil {
		return 0, fmt.Errorf("read the spend of %s from %s: %w", scopeName(spec), from.Format(time.RFC3339), err)
	}
	return total, nil
}

// Reserved is the part of Spend(spec, from, to) that turns still running
// reserved rather than spent.
func (s *Store) Reserved(ctx context.Context, spec string, from, to time.Time) (float64, error) {
	_, reserved, err := spendParts(ctx, s.db, spec, from, to)
	if err != nil {
		return 0, fmt.Errorf("read the reservations of %s from %s: %w", scopeName(spec), from.Format(time.RFC3339), err)
	}
	return reserved, nil
}

// spend is Spend read through q (a transaction's, for BeginTurn). A
// reservation counts in each period that ends after its turn started
// (the turn's cost will count where it finishes), as long as its run is
// not over: a turn whose process died holds its reservation until the
// run is recovered (which finishes or abandons the turn) or ends.
func spend(ctx context.Context, q querier, spec string, from, to time.Time) (float64, error) {
	spent, reserved, err := spendParts(ctx, q, spec, from, to)
	return spent + reserved, err
}

// spendParts is what the finished turns spent and the running ones
// reserved.
func spendParts(ctx context.Context, q querier, spec string, from, to time.Time) (spent, reserved float64, err error) {
	open := `SELECT COALESCE(SUM(t.reserved_usd), 0) FROM turns t JOIN runs r ON r.id = t.run_id
		WHERE t.finished = 0 AND t.reserved_usd > 0 AND t.started_at < ? AND r.status NOT IN (?, ?, ?, ?)`
	final := []any{RunDone, RunFailed, RunCancelled, RunStopped}
	if spec == CapScopeAll {
		if err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM turns WHERE finished_at >= ? AND finished_at < ?`,
			nanos(from), nanos(to)).Scan(&spent); err != nil {
			return 0, 0, err
		}
		err := q.QueryRowContext(ctx, open, append([]any{nanos(to)}, final...)...).Scan(&reserved)
		return spent, reserved, err
	}
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(t.cost_usd), 0) FROM turns t JOIN runs r ON r.id = t.run_id
		WHERE t.finished_at >= ? AND t.finished_at < ? AND r.spec = ?`, nanos(from), nanos(to), spec).Scan(&spent); err != nil {
		return 0, 0, err
	}
	err = q.QueryRowContext(ctx, open+` AND r.spec = ?`, append(append([]any{nanos(to)}, final...), spec)...).Scan(&reserved)
	return spent, reserved, err
}

// CapLimit is one spend cap a turn starts under (Turn.Caps): what the
// runs of Scope (CapScopeAll, or a spec's name) may spend in [From, To),
// raises included.
type CapLimit struct {
	Scope    string
	From, To time.Time
	Limit    float64
}

// ErrCapReached: BeginTurn found a spend cap of the turn reached (spent,
// or reserved by turns still running), and began no turn.
var ErrCapReached = errors.New("a spend cap is reached")

// reserve is what a turn under caps may spend, read in BeginTurn's
// transaction (writers are serialised there: on SQLite by the database's
// write lock, on PostgreSQL by the store's writers' lock), so that two
// turns starting at once never both get what is left: the lesser of
// budget (0: none) and what is left of the tightest cap.
func reserve(ctx context.Context, q querier, caps []CapLimit, budget float64) (float64, error) {
	left := math.Inf(1)
	for _, c := range caps {
		spent, err := spend(ctx, q, c.Scope, c.From, c.To)
		if err != nil {
			return 0, err
		}
		l := c.Limit - spent
		if l <= 1e-9 {
			return 0, fmt.Errorf("%s has spent or reserved $%.4f of its $%.4f from %s: %w",
				scopeName(c.Scope), spent, c.Limit, c.From.Format(time.RFC3339), ErrCapReached)
		}
		left = min(left, l)
	}
	if budget > 0 {
		left = min(left, budget)
	}
	if math.IsInf(left, 1) {
		return 0, nil
	}
	return left, nil
}

// SpecSpend is what the turns of each spec's runs that finished in
// [from, to) cost, by spec (runs of a prompt under ""): one statement.
func (s *Store) SpecSpend(ctx context.Context, from, to time.Time) (map[string]float64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.spec, COALESCE(SUM(t.cost_usd), 0) FROM turns t JOIN runs r ON r.id = t.run_id
		WHERE t.finished_at >= ? AND t.finished_at < ? GROUP BY r.spec`, nanos(from), nanos(to))
	if err != nil {
		return nil, fmt.Errorf("read the spend by spec: %w", err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var spec string
		var v float64
		if err := rows.Scan(&spec, &v); err != nil {
			return nil, fmt.Errorf("read the spend by spec: %w", err)
		}
		out[spec] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the spend by spec: %w", err)
	}
	return out, nil
}

// CapRaises is how much, and how many times, the cap of scope for the
// period ("day" or "month") that begins at start was raised.
func (s *Store) CapRaises(ctx context.Context, scope, period string, start time.Time) (total float64, n int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(amount), 0), COUNT(*) FROM cap_raises WHERE scope = ? AND period = ? AND period_start = ?`,
		scope, period, nanos(start)).Scan(&total, &n)
	if err != nil {
		return 0, 0, fmt.Errorf("read the raises of the %s cap of %s: %w", period, scopeName(scope), err)
	}
	return total, n, nil
}

// RaiseCap carries out a Continue at cap question set setID of run runID:
// it raises the cap of scope for the period that begins at start by
// amount, and marks the set resumed (its answer is consumed by the run,
// not handed to the model), in one transaction. A set raises its cap once:
// carried out again, it changes nothing (raised false).
func (s *Store) RaiseCap(ctx context.Context, runID, setID, scope, period string, start time.Time, amount float64) (raised bool, err error) {
	now := s.now().UTC()
	err = s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO cap_raises (set_id, scope, period, period_start, amount, created_at) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			setID, scope, period, nanos(start), amount, nanos(now))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		raised = n == 1
		_, err = tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, claimed_at = ?, resumed_at = ? WHERE id = ? AND run_id = ? AND state = ?`,
			SetResumed, nanos(now), nanos(now), setID, runID, SetAnswered)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("raise the %s cap of %s (question set %s): %w", period, scopeName(scope), setID, err)
	}
	return raised, nil
}

// CapSets returns the question sets of kind questions.KindCap asked since
// since by runs of spec, oldest first, with their answers.
func (s *Store) CapSets(ctx context.Context, spec string, since time.Time) ([]SetRecord, error) {
	recs, _, err := loadSetsJoined(ctx, s.db, `qs.kind = ? AND qs.created_at >= ? AND qs.run_id IN (SELECT id FROM runs WHERE spec = ?)`,
		questions.KindCap, nanos(since), spec)
	if err != nil {
		return nil, fmt.Errorf("read the cap questions of spec %s: %w", spec, err)
	}
	return recs, nil
}

func scopeName(scope string) string {
	if scope == CapScopeAll {
		return "all runs"
	}
	return "spec " + scope
}

// ConsumeSet marks answered set setID of run runID resumed: the run
// carried its answer out itself (a cap question whose period is over by
// the time it is answered), nothing is handed to the model.
func (s *Store) ConsumeSet(ctx context.Context, runID, setID string) error {
	now := s.now().UTC()
	err := s.tx(ctx, func(tx *txn) error {
		if err := s.checkFence(ctx, tx, runID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE question_sets SET state = ?, claimed_at = ?, resumed_at = ? WHERE id = ? AND run_id = ? AND state = ?`,
			SetResumed, nanos(now), nanos(now), setID, runID, SetAnswered)
		return err
	})
	if err != nil {
		return fmt.Errorf("consume question set %s: %w", setID, err)
	}
	return nil
}

// kindCap is the kind of a cap question (questions.KindCap): a run whose
// cap question waits is not claimable for its other answered sets
// (ClaimableRuns).
const kindCap = questions.KindCap
