package runner

import (
	"context"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Ask asks the pending question set of a waiting run on the run's surfaces
// and waits until the set is no longer pending — answered on a surface, by
// `orchestrator answer` or the web inbox of any instance, by a preset or
// the timeout policy — or the run ends, or ctx ends. It carries out the
// set's reminders, escalation and timeout on the way. It does not drive
// the run: on a shared store the leading instance asks (it holds the
// shared connections: GitHub polling, the Discord gateway), and whichever
// instance claims the run then resumes it (Config.Park). It returns nil
// when there is nothing to ask: the run is not waiting, or its set is
// answered already.
func (r *Runner) Ask(ctx context.Context, runID string) error {
	st := r.cfg.Store
	run, err := st.Run(ctx, runID)
	if err != nil {
		return err
	}
	if run.Status != store.RunWaiting {
		// A running run's questions (a tool call's approval while the CLI
		// is held) are asked by the turn that holds it.
		return nil
	}
	sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID, State: []store.SetState{store.SetAnswered, store.SetPending}})
	if err != nil {
		return err
	}
	var pending *store.SetRecord
	for i, rec := range sets {
		if rec.State == store.SetAnswered {
			return nil // a worker resumes it
		}
		if pending == nil {
			pending = &sets[i]
		}
	}
	if pending == nil {
		return nil
	}
	res, err := r.cfg.Resolve(run)
	if err != nil {
		if ferr := r.fail(ctx, run, err.Error()); ferr != nil {
			return fmt.Errorf("run %s: %w (and failing it: %v)", run.ID, err, ferr)
		}
		return nil
	}
	return r.wait(ctx, &drive{Resolved: res}, run, *pending)
}
