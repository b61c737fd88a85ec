package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
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

type statusQuestion struct {
	ID       string   `json:"id"`
	SetID    string   `json:"set_id"`
	RunID    string   `json:"run_id"`
	Header   string   `json:"header,omitempty"`
	Text     string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	Surfaces []string `json:"surfaces"`
	Asked    string   `json:"asked_at"`
}

type statusRun struct {
	ID        string  `json:"id"`
	Spec      string  `json:"spec,omitempty"`
	Title     string  `json:"title"`
	Status    string  `json:"status"`
	SessionID string  `json:"session_id"`
	CostUSD   float64 `json:"cost_usd"`
	Error     string  `json:"error,omitempty"`
	Updated   string  `json:"updated_at"`
}

type statusNext struct {
	Spec string `json:"spec"`
	Next string `json:"next"`
}

type statusReport struct {
	Runs      []statusRun      `json:"runs"`
	Questions []statusQuestion `json:"questions"`
	Schedule  []statusNext     `json:"schedule"`
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
	rep := statusReport{Runs: []statusRun{}, Questions: []statusQuestion{}, Schedule: []statusNext{}}
	for _, r := range runs {
		rep.Runs = append(rep.Runs, statusRun{ID: r.ID, Spec: r.Spec, Title: r.Title, Status: string(r.Status), SessionID: r.SessionID,
			CostUSD: r.CostUSD, Error: r.Error, Updated: r.UpdatedAt.Format(time.RFC3339)})
	}
	for _, s := range sets {
		for _, q := range s.Set.Questions {
			if _, answered := s.Response.Answer(q.ID); answered {
				continue
			}
			sq := statusQuestion{ID: q.ID, SetID: s.Set.ID, RunID: s.Set.RunID, Header: q.Header, Text: q.Text,
				Surfaces: s.Surfaces, Asked: s.CreatedAt.Format(time.RFC3339)}
			for _, o := range q.Options {
				sq.Options = append(sq.Options, o.Label)
			}
			rep.Questions = append(rep.Questions, sq)
		}
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
			rep.Schedule = append(rep.Schedule, statusNext{Spec: sp.Name, Next: sched.Next(now).Format(time.RFC3339)})
		}
	}
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "No active runs.")
	} else {
		fmt.Fprintln(w, "RUN\tSTATUS\tSPEC\tTITLE\tCOST\tUPDATED")
		for _, r := range rep.Runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t$%.4f\t%s\n", r.ID, r.Status, dash(r.Spec), clip(r.Title, 48), r.CostUSD, r.Updated)
		}
	}
	w.Flush()
	if len(rep.Questions) > 0 {
		fmt.Fprintln(m.Stdout)
		fmt.Fprintln(w, "QUESTION\tRUN\tSURFACES\tASKED\tTEXT")
		for _, q := range rep.Questions {
			text := q.Text
			if q.Header != "" {
				text = q.Header + ": " + text
			}
			if len(q.Options) > 0 {
				text += " [" + strings.Join(q.Options, " | ") + "]"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", q.ID, q.RunID, strings.Join(orNone(q.Surfaces), ","), q.Asked, clip(text, 90))
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
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
