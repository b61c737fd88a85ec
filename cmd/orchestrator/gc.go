package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

func (m *Main) newGCCmd() *cobra.Command {
	var olderThan string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove the git worktrees of runs that ended long enough ago",
		Long: `gc removes the worktrees of runs that ended (done, failed or cancelled) longer
ago than git.keep_worktrees (or --older-than), then runs 'git worktree prune'
in each checkout they came from. A failed run's worktree is kept until then,
for inspection; branches are left alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			age := m.Config.Git.KeepWorktrees.Std()
			if olderThan != "" {
				d, err := config.ParseDuration(olderThan)
				if err != nil || d < 0 {
					return usageError(fmt.Errorf("--older-than: %v", err))
				}
				age = d.Std()
			}
			return m.runGC(cmd.Context(), age)
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "remove worktrees of runs that ended longer ago than this (default git.keep_worktrees)")
	return cmd
}

func (m *Main) runGC(ctx context.Context, age time.Duration) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	d, err := m.deliverer(st, nil)
	if err != nil {
		return err
	}
	removed, err := d.GC(ctx, age)
	for _, r := range removed {
		fmt.Fprintf(m.Stdout, "removed %s (run %s, %s)\n", r.Worktree, r.RunID, r.Status)
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if len(removed) == 0 {
		fmt.Fprintf(m.Stdout, "no worktree of a run that ended more than %s ago\n", age)
	}
	return nil
}

// statusWorktree is a worktree kept on disk (status lists them): a failed
// run's, kept for inspection, or one still in use.
type statusWorktree struct {
	RunID    string `json:"run_id"`
	Spec     string `json:"spec,omitempty"`
	Status   string `json:"status"`
	Branch   string `json:"branch"`
	Worktree string `json:"worktree"`
}

// keptWorktrees lists the worktrees of ended runs still on disk.
func keptWorktrees(ctx context.Context, st interface {
	KeptWorktrees(context.Context) ([]store.KeptWorktree, error)
}) ([]statusWorktree, error) {
	kept, err := st.KeptWorktrees(ctx)
	if err != nil {
		return nil, err
	}
	out := []statusWorktree{}
	for _, k := range kept {
		if !k.Run.Status.Final() {
			continue
		}
		out = append(out, statusWorktree{RunID: k.Run.ID, Spec: k.Run.Spec, Status: string(k.Run.Status), Branch: k.Delivery.Branch, Worktree: k.Delivery.Worktree})
	}
	return out, nil
}

func printWorktrees(w io.Writer, list []statusWorktree) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintln(w, "\nKept worktrees (remove with: orchestrator gc):")
	for _, k := range list {
		fmt.Fprintf(w, "  %s  run %s (%s), branch %s\n", k.Worktree, k.RunID, k.Status, k.Branch)
	}
}
