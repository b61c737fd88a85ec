package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/spf13/cobra"
)

func (m *Main) newResumeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a waiting or interrupted run, or a done run's pending delivery",
		Long: `resume continues a run that is waiting on a question or was interrupted (by a
signal, a crash, or the terminal's input ending): answered questions are handed
to the model, pending ones are asked again, and an interrupted turn is
recovered without sending its prompt twice. A done run whose push or pull
request failed (its delivery pending) has them tried again now. RUN may be a
unique prefix.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runResume(cmd.Context(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print progress as NDJSON events on stdout, see docs/json.md (questions go to stderr)")
	return cmd
}

func (m *Main) runResume(ctx context.Context, id string, asJSON bool) error {
	m.foreground()
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	run, err := st.Run(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		m.termOut = m.Stderr
	}
	if run.Status.Final() {
		dl, ok, err := st.Delivery(ctx, run.ID)
		if err != nil {
			return err
		}
		if run.Status != store.RunDone || !ok || !dl.Pending {
			return fmt.Errorf("run %s is %s: nothing to resume", run.ID, run.Status)
		}
		// Done, its push or pull request pending: try it now.
		p := m.newProgress(asJSON)
		r, _, err := m.newRunner(st, p.observe)
		if err != nil {
			return err
		}
		if _, err := r.Redeliver(ctx, run.ID); err != nil {
			return err
		}
		if dl, _, err := st.Delivery(ctx, run.ID); err != nil || dl.Pending {
			return errors.Join(err, fmt.Errorf("run %s: its delivery is still pending: %s", run.ID, dl.LastError))
		}
		return nil
	}
	p := m.newProgress(asJSON)
	r, fn, err := m.newForegroundRunner(st, p.observe) // notify_foreground.go
	if err != nil {
		return err
	}
	defer fn.flush(ctx, m)
	fn.forRun(m, run)
	stop := fn.watch(ctx, run.ID)
	defer stop() // before flush
	p.resumed(run)
	return m.drive(ctx, r, p, run.ID)
}
