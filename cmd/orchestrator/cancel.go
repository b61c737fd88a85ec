package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

func (m *Main) newCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Give up on a run for good: it becomes cancelled and its questions expire",
		Long: `cancel ends a run that is waiting, interrupted or running: its status becomes
cancelled and its pending questions expire, so no answer resumes it any more.
A process waiting on one of its questions (run, resume, serve) stops waiting;
a turn running is stopped (the agent CLI's process group is interrupted, then
killed) and recorded as cancelled before cancel returns. When no process
drives the run, cancel shows its questions closed on its surfaces (and
closes its own GitHub issue) itself; when those surfaces cannot be built (a
token variable unset, say) it says so and cancels anyway. RUN may be a
unique prefix.`,
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runCancel(cmd.Context(), args[0])
		},
	}
}

func (m *Main) runCancel(ctx context.Context, id string) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	run, err := st.Run(ctx, id)
	if err != nil {
		return err
	}
	if run.Status.Final() {
		return fmt.Errorf("run %s is already %s", run.ID, run.Status)
	}
	// The sets the cancel expires, to show them closed when no process
	// drives the run.
	open, err := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID, State: []store.SetState{store.SetPending, store.SetAnswered}})
	if err != nil {
		return err
	}
	if err := st.CancelRun(ctx, run.ID, "cancelled by "+whoami()); err != nil {
		return err
	}
	// The process driving the run, if any, stops its agent and records the
	// turn cancelled, then lets the run go (and shows its questions
	// closed): wait for that.
	deadline := time.Now().Add(cancelWait)
	for first := true; ; first = false {
		driven, err := st.RunDriven(run.ID)
		if err != nil {
			return err
		}
		if !driven {
			if first {
				m.tidyCancelled(ctx, st, run.ID, open)
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("run %s is cancelled, but the process driving it has not stopped its agent within %s", run.ID, cancelWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Fprintf(m.Stdout, "run %s cancelled.\n", run.ID)
	return nil
}

// cancelWait bounds how long cancel waits for the process driving a run to
// stop its agent (the CLI's interrupt, then kill, grace is a few seconds).
const cancelWait = time.Minute

// tidyCancelled does for a cancelled run no process drives what the process
// driving it would have done (runner.TidyEnded): its question comments show
// it cancelled, and its own issue is closed. Best effort: when the run's
// surfaces cannot be built (a token variable unset, say), one line says the
// questions were not updated and why; the cancel stands.
func (m *Main) tidyCancelled(ctx context.Context, st *store.Store, runID string, open []store.SetRecord) {
	run, err := st.Run(ctx, runID)
	if err != nil {
		m.Logger.Warn("look up the cancelled run to close its questions", "run", runID, "err", err)
		return
	}
	surfs, err := m.remoteSurfaces(st, run)
	if err != nil {
		fmt.Fprintf(m.Stderr, "note: the run's question comments and issue were not updated: %v\n", err)
		return
	}
	sets := make([]questions.Set, len(open))
	for i, r := range open {
		sets[i] = r.Set
	}
	runner.TidyEnded(ctx, m.Logger, run, sets, surfs)
}

// remoteSurfaces builds the surfaces run asks on other than the terminal (the
// terminal of this process is not the one that asked), as a resume would:
// with the overrides of the run's spec. A problem of their configuration,
// which the command was loaded despite, is an error.
func (m *Main) remoteSurfaces(st *store.Store, run store.Run) ([]surfaces.Surface, error) {
	var names []string
	for _, name := range run.Surfaces {
		if name == "terminal" {
			continue
		}
		names = append(names, name)
		for _, e := range m.surfaceProblems {
			var ce *config.Error
			if errors.As(e, &ce) && (ce.Key == "surfaces."+name || strings.HasPrefix(ce.Key, "surfaces."+name+".")) {
				return nil, e
			}
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sp, err := m.specOf(run)
	if err != nil {
		return nil, err
	}
	run.Surfaces = names
	return m.newSurfaceSet(st).surfacesFor(run, sp)
}
