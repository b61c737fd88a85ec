package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newStatusCmd() *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List runs and the questions waiting for an answer",
		Long: `status lists the active runs (running, waiting, interrupted) — every run with
--all — the questions waiting for an answer with their IDs and surfaces, and
the next run times of the scheduled specs in specs.dir.`,
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runStatus(cmd.Context(), asJSON, all)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list finished runs too")
	return cmd
}

// statusNext is a scheduled spec's next run time.
type statusNext struct {
	Spec string    `json:"spec"`
	Next time.Time `json:"next"`
}

// statusReport is the output of status --json (docs/json.md).
type statusReport struct {
	V            int              `json:"v"`
	Runs         []jsonRun        `json:"runs"`
	QuestionSets []jsonSet        `json:"question_sets"`
	Schedule     []statusNext     `json:"schedule"`
	Worktrees    []statusWorktree `json:"worktrees"` // gc.go
}

func (m *Main) runStatus(ctx context.Context, asJSON, all bool) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	f := store.RunFilter{Status: []store.RunStatus{store.RunRunning, store.RunWaiting, store.RunInterrupted}}
	if all {
		f = store.RunFilter{Limit: 100}
	}
	runs, err := st.ListRuns(ctx, f)
	if err != nil {
		return err
	}
	sets, err := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
	if err != nil {
		return err
	}
	rep := statusReport{V: jsonVersion, Runs: []jsonRun{}, QuestionSets: []jsonSet{}, Schedule: []statusNext{}}
	for _, r := range runs {
		rep.Runs = append(rep.Runs, newJSONRun(r))
	}
	for _, s := range sets {
		rep.QuestionSets = append(rep.QuestionSets, newJSONSetRecord(s))
	}
	if list, err := specs.LoadDir(m.Config.Specs.Dir); err == nil || len(list) > 0 {
		now := time.Now()
		for _, sp := range list {
			if sp.Schedule == "" {
				continue
			}
			sched, err := specs.ParseSchedule(sp.Schedule)
			if err != nil {
				continue
			}
			rep.Schedule = append(rep.Schedule, statusNext{Spec: sp.Name, Next: sched.Next(now).UTC()})
		}
	}
	if rep.Worktrees, err = keptWorktrees(ctx, st); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(m.Stdout, rep)
	}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "No active runs.")
	} else {
		fmt.Fprintln(w, "RUN\tSTATUS\tSPEC\tTITLE\tCOST\tUPDATED")
		for _, r := range rep.Runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t$%.4f\t%s\n", r.ID, r.Status, dash(r.Spec), clip(r.Title, 48), r.CostUSD, r.UpdatedAt.Local().Format(time.RFC3339))
		}
	}
	w.Flush()
	if pending := pendingQuestions(rep.QuestionSets); len(pending) > 0 {
		fmt.Fprintln(m.Stdout)
		fmt.Fprintln(w, "QUESTION\tRUN\tSURFACES\tASKED\tTEXT")
		for _, pq := range pending {
			q := pq.q
			text := q.Text
			if q.Header != "" {
				text = q.Header + ": " + text
			}
			if len(q.Options) > 0 {
				var labels []string
				for _, o := range q.Options {
					labels = append(labels, o.Label)
				}
				text += " [" + strings.Join(labels, " | ") + "]"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", q.ID, pq.set.RunID, strings.Join(orNone(pq.set.Surfaces), ","),
				pq.set.CreatedAt.Local().Format(time.RFC3339), clip(text, 90))
		}
		w.Flush()
		fmt.Fprintln(m.Stdout, "\nAnswer with: orchestrator answer QUESTION TEXT")
	}
	if len(rep.Schedule) > 0 {
		fmt.Fprintln(m.Stdout)
		fmt.Fprintln(w, "SPEC\tNEXT RUN")
		for _, s := range rep.Schedule {
			fmt.Fprintf(w, "%s\t%s\n", s.Spec, s.Next)
		}
		w.Flush()
	}
	printWorktrees(m.Stdout, rep.Worktrees)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pendingQuestion is a question not answered yet, with its set.
type pendingQuestion struct {
	set *jsonSet
	q   jsonQuestion
}

func pendingQuestions(sets []jsonSet) []pendingQuestion {
	var out []pendingQuestion
	for i := range sets {
		for _, q := range sets[i].Questions {
			if !q.Answered {
				out = append(out, pendingQuestion{set: &sets[i], q: q})
			}
		}
	}
	return out
}

// clip makes untrusted text printable on one line of at most n characters.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(questions.Printable(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
