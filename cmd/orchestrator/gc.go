package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

func (m *Main) newGCCmd() *cobra.Command {
	var olderThan string
	var dry bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove what ended runs left behind, past the retention",
		Long: `gc removes what runs that are over (done, failed, cancelled, stopped) left
behind, once it is older than the configuration says:
  - their git worktrees, after git.keep_worktrees (or --older-than), then
    'git worktree prune' in each checkout they came from;
  - their local branches in your checkout, after retention.branches, or as
    soon as the worktree is gone when the branch was pushed; a branch that
    moved past the run's commit, or is checked out, is left alone;
  - transcripts (under <state_dir>/transcripts), after retention.transcripts;
  - the runs' rows in the store, after retention.runs, with their turns,
    questions and answers (the decision log), sessions and tool calls.
Nothing of a run that is not over (queued, running, waiting, interrupted)
is removed. serve runs gc once a day. --dry-run lists what would go.`,
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
			st, err := m.openStore(cmd.Context())
			if err != nil {
				return err
			}
			rep, err := m.collect(cmd.Context(), st, age, dry, gcAll)
			rep.print(m.Stdout, dry)
			if err != nil {
				return fmt.Errorf("gc: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "remove worktrees of runs that ended longer ago than this (default git.keep_worktrees)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
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
