package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func (m *Main) newCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Give up on a run for good: it becomes cancelled and its questions expire",
		Long: `cancel ends a run that is waiting, interrupted or running: its status becomes
cancelled and its pending questions expire, so no answer resumes it any more.
A process waiting on one of its questions (run, resume, serve) stops waiting;
a turn already running finishes first. RUN may be a unique prefix.`,
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
	fmt.Fprintf(m.Stdout, "run %s cancelled.\n", run.ID)
	return nil
}
