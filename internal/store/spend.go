package store

import (
	"context"
	"fmt"
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
// run) that finished in [from, to) cost, in US dollars.
func (s *Store) Spend(ctx context.Context, spec string, from, to time.Time) (float64, error) {
	var total float64
	var err error
	if spec == CapScopeAll {
		err = s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM turns WHERE finished_at >= ? AND finished_at < ?`,
			nanos(from), nanos(to)).Scan(&total)
	} else {
		err = s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(t.cost_usd), 0) FROM turns t JOIN runs r ON r.id = t.run_id
			WHERE t.finished_at >= ? AND t.finished_at < ? AND r.spec = ?`, nanos(from), nanos(to), spec).Scan(&total)
	}
	if err != nil {
		return 0, fmt.Errorf("read the spend of %s from %s: %w", scopeName(spec), from.Format(time.RFC3339), err)
	}
	return total, nil
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
