package runner

import (
	"context"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// One cost per turn (issue 20). The CLI's total_cost_usd is the session's
// cost so far: a resumed session counts its earlier turns again. A turn's
// cost is the difference of that total from what the session's earlier
// turns cost (their stored costs add up to the total the session had
// reached). What the CLI says this process spent since its last result
// (model_usage_since_last_result) is the floor: when the session's total
// started again from nothing (the CLI keeps it per project directory, so
// another session there, or another machine, resets it), the difference
// would count too little. So the stored costs of a run add up to the
// session's last total_cost_usd, and /metrics, show, status, the budget
// question and the pull request's body all count each call once.

// turnCost is the cost of turn seq of run, which ended with out.
func (r *Runner) turnCost(ctx context.Context, runID string, seq int, session string, out executor.Outcome) float64 {
	if out.CostUSD <= 0 {
		return out.TurnCostUSD
	}
	turns, err := r.cfg.Store.Turns(ctx, runID)
	if err != nil {
		r.log.Warn("cannot read the run's turns to count this turn's cost once; taking what the CLI says it spent since its last result", "run", runID, "turn", seq, "err", err)
		return out.TurnCostUSD
	}
	return sessionDelta(out, turns, seq, session)
}

// sessionDelta is the cumulative out.CostUSD less the stored costs of the
// finished turns before seq in session, at least out.TurnCostUSD.
func sessionDelta(out executor.Outcome, turns []store.Turn, seq int, session string) float64 {
	before := 0.0
	for _, t := range turns {
		if t.Seq < seq && t.Finished && t.SessionID == session {
			before += t.Result.CostUSD
		}
	}
	return max(out.CostUSD-before, out.TurnCostUSD)
}
