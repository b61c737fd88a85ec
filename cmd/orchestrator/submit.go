package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
)

func (m *Main) newSubmitCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "submit (SPEC.md | SPEC-NAME | --prompt TEXT)",
		Short: "Queue a spec or a prompt for a running serve to take, and print the run's ID",
		Long: `submit stores a run of a spec file, the name of a spec in specs.dir, or
--prompt, queued, and prints its ID. It does not run it: an 'orchestrator serve'
on the same database takes it — on PostgreSQL (database_url) whichever instance
has room first, on SQLite the serve of the same state directory. Follow it
with 'orchestrator status' and 'orchestrator show RUN'.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 1 {
				spec = args[0]
			}
			return m.runSubmit(cmd.Context(), spec, f)
		},
	}
	taskFlags(cmd, &f) // run.go
	return cmd
}

func (m *Main) runSubmit(ctx context.Context, specPath string, f runFlags) error {
	n, err := m.newRunFrom(specPath, f)
	if err != nil {
		return err
	}
	n.Queued = true
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	r, _, err := m.newRunner(st, func(runner.Event) {})
	if err != nil {
		return err
	}
	run, err := r.Create(ctx, n)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, run.ID)
	return nil
}
