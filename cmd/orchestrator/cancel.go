package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (m *Main) newCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Give up on a run for good: it becomes cancelled and its questions expire",
		Long: `cancel ends a run that is waiting, interrupted or running: its status becomes
cancelled and its pending questions expire, so no answer resumes it any more.
A process waiting on one of its questions (run, resume, serve) stops waiting;
a turn running is stopped (the agent CLI's process group is interrupted, then
killed) and recorded as cancelled before cancel returns. RUN may be a unique
prefix.`,
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
	if err := st.CancelRun(ctx, run.ID, "cancelled by "+whoami()); err != nil {
		return err
	}
	// The process driving the run, if any, stops its agent and records the
	// turn cancelled, then lets the run go: wait for that.
	deadline := time.Now().Add(cancelWait)
	for {
		driven, err := st.RunDriven(run.ID)
		if err != nil {
			return err
		}
		if !driven {
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
