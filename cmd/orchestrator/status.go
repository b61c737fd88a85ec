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
	var spec string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List runs and the questions waiting for an answer",
		Long: `status says whether a serve is running on this state directory, lists the
active runs (running, waiting, interrupted) — every run with --all — the
questions waiting for an answer with their IDs and surfaces, and when the
scheduled specs in specs.dir run next: a spec whose previous run still runs
or waits is skipped by the scheduler, and status says so instead of a time.
Each spec's runs are summed up: how many, what they cost, how the newest
ended.
--spec NAME shows only that spec's runs, questions and schedule.`,
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runStatus(cmd.Context(), asJSON, all, spec)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list finished runs too")
	cmd.Flags().StringVar(&spec, "spec", "", "only this spec's runs, questions and schedule")
	return cmd
}

// statusNext is a scheduled spec's next run time, or, when the scheduler
// will skip its ticks, the active run it waits for (Next is then left out).
type statusNext struct {
	Spec         string         `json:"spec"`
	Next         *time.Time     `json:"next,omitempty"`
	SkippedWhile *statusSkipped `json:"skipped_while,omitempty"`
}

// statusSkipped is the run of a spec that still runs or waits: the
// scheduler skips the spec's ticks until it ends.
type statusSkipped struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
}

// statusSpec is what a spec's runs cost, all together, and how its newest
// run stands.
type statusSpec struct {
	Spec       string  `json:"spec"`
	Runs       int     `json:"runs"`
	CostUSD    float64 `json:"cost_usd"`
	LastStatus string  `json:"last_status"`
}

// statusReport is the output of status --json (docs/json.md).
type statusReport struct {
	V            int              `json:"v"`
	Serve        statusServe      `json:"serve"`
	Runs         []jsonRun        `json:"runs"`
	QuestionSets []jsonSet        `json:"question_sets"`
	Schedule     []statusNext     `json:"schedule"`
	Specs        []statusSpec     `json:"specs"`
	Worktrees    []statusWorktree `json:"worktrees"` // gc.go
	// Deliveries are the deliveries still to finish: a done run's push
	// or pull request that failed (pending, tried again), and a waiting
	// run's work in progress that its push did not bring to the remote
	// (the run stays with its host until one does).
	Deliveries []statusDelivery `json:"deliveries"`
	// Instances are the serve instances of a shared database whose
	// heartbeat is recent (two lease TTLs).
	Instances []statusInstance `json:"instances,omitempty"`
}

type statusDelivery struct {
	RunID  string `json:"run_id"`
	Spec   string `json:"spec,omitempty"`
	Status string `json:"status"`
	// What is "push" or "pull_request" (a pending delivery), or
	// "work_in_progress" (a parked commit not on the remote).
	What          string     `json:"what"`
	Branch        string     `json:"branch"`
	Commit        string     `json:"commit,omitempty"`
	Host          string     `json:"host,omitempty"`
	Attempts      int        `json:"attempts,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// statusDeliveries lists the deliveries still to finish (statusReport).
func statusDeliveries(ctx context.Context, st *store.Store, active []jsonRun) ([]statusDelivery, error) {
	out := []statusDelivery{}
	pending, err := st.PendingDeliveries(ctx, time.Now().AddDate(100, 0, 0))
	if err != nil {
		return nil, err
	}
	for _, dl := range pending {
		run, err := st.Run(ctx, dl.RunID)
		if err != nil {
			return nil, err
		}
		what := "push"
		if dl.Pushed {
			what = "pull_request"
		}
		out = append(out, statusDelivery{RunID: run.ID, Spec: run.Spec, Status: string(run.Status), What: what, Branch: dl.Branch,
			Commit: dl.CommitSHA, Host: questions.Printable(run.Host), Attempts: dl.Attempts, NextAttemptAt: timePtr(dl.NextAttemptAt),
			LastError: questions.Printable(dl.LastError)})
	}
	for _, r := range active {
		if r.Host == "" {
			continue
		}
		dl, ok, err := st.Delivery(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if ok && dl.State == store.DeliveryPrepared && dl.CommitSHA != "" && !dl.Pushed {
			out = append(out, statusDelivery{RunID: r.ID, Spec: r.Spec, Status: r.Status, What: "work_in_progress", Branch: dl.Branch,
				Commit: dl.CommitSHA, Host: r.Host})
		}
	}
	return out, nil
}

type statusInstance struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Leader      bool      `json:"leader"`
	Driving     int       `json:"driving"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

func (m *Main) runStatus(ctx context.Context, asJSON, all bool, spec string) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	f := store.RunFilter{Status: []store.RunStatus{store.RunQueued, store.RunRunning, store.RunWaiting, store.RunInterrupted}, Spec: spec}
	if all {
		f = store.RunFilter{Limit: 100, Spec: spec}
	}
	runs, err := st.ListRuns(ctx, f)
	if err != nil {
		return err
	}
	sets, err := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
	if err != nil {
		return err
	}
	rep := statusReport{V: jsonVersion, Serve: probeServe(st.Dir()), Runs: []jsonRun{}, QuestionSets: []jsonSet{}, Schedule: []statusNext{}, Specs: []statusSpec{}}
	if st.Shared() {
		list, err := st.Instances(ctx, time.Now().Add(-2*st.LeaseTTL()))
		if err != nil {
			return err
		}
		for _, in := range list {
			rep.Instances = append(rep.Instances, statusInstance{ID: questions.Printable(in.ID), Host: questions.Printable(in.Host), PID: in.PID,
				Leader: in.Leader, Driving: in.Driving, StartedAt: in.StartedAt, HeartbeatAt: in.HeartbeatAt})
		}
	}
	for _, r := range runs {
		jr := newJSONRun(r)
		if l, ok, err := st.RunLease(ctx, r.ID); err != nil {
			return err
		} else if ok {
			jr.DrivenBy = questions.Printable(l.Owner)
		}
		rep.Runs = append(rep.Runs, jr)
	}
	specOf := map[string]string{} // run ID → spec, for --spec
	for _, s := range sets {
		if spec != "" {
			if _, ok := specOf[s.Set.RunID]; !ok {
				r, err := st.Run(ctx, s.Set.RunID)
				if err != nil {
					return err
				}
				specOf[s.Set.RunID] = r.Spec
			}
			if specOf[s.Set.RunID] != spec {
				continue
			}
		}
		rep.QuestionSets = append(rep.QuestionSets, newJSONSetRecord(s))
	}
	list, _ := specs.LoadDir(m.Config.Specs.Dir) // validate reports bad specs; status lists the good ones
	known := false
	now := time.Now()
	for _, sp := range list {
		known = known || sp.Name == spec
		if sp.Schedule == "" || (spec != "" && sp.Name != spec) {
			continue
		}
		sched, err := specs.ParseSchedule(sp.Schedule)
		if err != nil {
			continue
		}
		// The scheduler's rule (internal/daemon: busy): a tick is skipped
		// while a run of the spec runs or waits.
		active, err := st.ListRuns(ctx, store.RunFilter{Spec: sp.Name, Status: []store.RunStatus{store.RunRunning, store.RunWaiting}, Limit: 1})
		if err != nil {
			return err
		}
		if len(active) > 0 {
			rep.Schedule = append(rep.Schedule, statusNext{Spec: sp.Name, SkippedWhile: &statusSkipped{RunID: active[0].ID, Status: string(active[0].Status)}})
			continue
		}
		next := sched.Next(now).UTC()
		rep.Schedule = append(rep.Schedule, statusNext{Spec: sp.Name, Next: &next})
	}
	costs, err := st.SpecCosts(ctx, spec)
	if err != nil {
		return err
	}
	for _, c := range costs {
		rep.Specs = append(rep.Specs, statusSpec{Spec: c.Spec, Runs: c.Runs, CostUSD: c.CostUSD, LastStatus: string(c.LastStatus)})
	}
	if rep.Worktrees, err = keptWorktrees(ctx, st); err != nil {
		return err
	}
	if rep.Deliveries, err = statusDeliveries(ctx, st, rep.Runs); err != nil {
		return err
	}
	if spec != "" {
		if !known && len(rep.Runs) == 0 {
			if any, err := st.ListRuns(ctx, store.RunFilter{Spec: spec, Limit: 1}); err != nil {
				return err
			} else if len(any) == 0 {
				return usageError(fmt.Errorf("--spec %s: no spec of that name in %s and no run of it", spec, m.Config.Specs.Dir))
			}
		}
		kept := []statusWorktree{}
		for _, k := range rep.Worktrees {
			if k.Spec == spec {
				kept = append(kept, k)
			}
		}
		rep.Worktrees = kept
		dls := []statusDelivery{}
		for _, d := range rep.Deliveries {
			if d.Spec == spec {
				dls = append(dls, d)
			}
		}
		rep.Deliveries = dls
	}
	if asJSON {
		return writeJSON(m.Stdout, rep)
	}
	switch s := rep.Serve; {
	case st.Shared():
		// The state directory's probe says nothing of the instances on
		// other machines: the leases below do.
		fmt.Fprintf(m.Stdout, "serve: %d instance(s) on this PostgreSQL database (database_url); each active run below says which drives it\n", len(rep.Instances))
		for _, in := range rep.Instances {
			role := ""
			if in.Leader {
				role = ", leader"
			}
			fmt.Fprintf(m.Stdout, "  %s (driving %d%s, last seen %s)\n", in.ID, in.Driving, role, in.HeartbeatAt.Local().Format(time.RFC3339))
		}
		fmt.Fprintln(m.Stdout)
	case s.State == "running":
		if s.PID > 0 {
			fmt.Fprintf(m.Stdout, "serve: running on this state directory (pid %d)\n\n", s.PID)
		} else {
			fmt.Fprint(m.Stdout, "serve: running on this state directory\n\n")
		}
	case s.State == "stopped":
		fmt.Fprint(m.Stdout, "serve: not running on this state directory (scheduled specs do not run, answered runs wait for 'orchestrator resume')\n\n")
	default:
		fmt.Fprintf(m.Stdout, "serve: unknown (%s)\n\n", s.Note)
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
	wip := map[string]statusDelivery{}
	for _, d := range rep.Deliveries {
		if d.What == "work_in_progress" {
			wip[d.RunID] = d
		}
	}
	for _, r := range rep.Runs {
		// Several instances on one database: say where a run is.
		switch d, unpushed := wip[r.ID]; {
		case r.DrivenBy != "":
			fmt.Fprintf(m.Stdout, "run %s: driven by instance %s\n", r.ID, r.DrivenBy)
		case unpushed && (r.Status == string(store.RunWaiting) || r.Status == string(store.RunInterrupted) || r.Status == string(store.RunQueued)):
			fmt.Fprintf(m.Stdout, "run %s: stays with host %s, whose checkout alone has its work in progress (commit %.12s on branch %s): "+
				"the push of it failed; it goes on there, or anywhere once a push succeeds\n", r.ID, r.Host, d.Commit, d.Branch)
		case r.Host != "" && (r.Status == string(store.RunWaiting) || r.Status == string(store.RunInterrupted) || r.Status == string(store.RunQueued)):
			fmt.Fprintf(m.Stdout, "run %s: stays with host %s, which holds its working directory (its work is not delivered through git)\n", r.ID, r.Host)
		}
	}
	if pending := pendingQuestions(rep.QuestionSets); len(pending) > 0 {
		fmt.Fprintln(m.Stdout)
		fmt.Fprintln(w, "QUESTION\tRUN\tSURFACES\tASKED\tTEXT")
		for _, pq := range pending {
			q := pq.q
			text := q.Text
			if q.Header != "" {
				text = q.Header + ": " + text
			}
			if pq.set.Kind == questions.KindApproval && pq.set.Tool != nil {
				text = "Approval: " + pq.set.Tool.Name + " " + callSummary(pq.set.Tool.Input) // approvals_wiring.go
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
			if s.SkippedWhile != nil {
				verb := "runs"
				if s.SkippedWhile.Status == string(store.RunWaiting) {
					verb = "waits"
				}
				fmt.Fprintf(w, "%s\tskipped while run %s %s\n", s.Spec, s.SkippedWhile.RunID, verb)
				continue
			}
			fmt.Fprintf(w, "%s\t%s\n", s.Spec, s.Next.Local().Format(time.RFC3339))
		}
		w.Flush()
	}
	if len(rep.Specs) > 0 {
		fmt.Fprintln(m.Stdout)
		fmt.Fprintln(w, "SPEC\tRUNS\tCOST\tLAST RUN")
		for _, s := range rep.Specs {
			fmt.Fprintf(w, "%s\t%d\t$%.4f\t%s\n", s.Spec, s.Runs, s.CostUSD, s.LastStatus)
		}
		w.Flush()
	}
	var pend []statusDelivery
	for _, d := range rep.Deliveries {
		if d.What != "work_in_progress" {
			pend = append(pend, d)
		}
	}
	if len(pend) > 0 {
		fmt.Fprintln(m.Stdout, "\nPending deliveries (serve tries them again; or now: orchestrator resume RUN):")
		for _, d := range pend {
			what := "the branch is not pushed yet"
			if d.What == "pull_request" {
				what = "the pull request is not opened yet"
			}
			next := ""
			if d.NextAttemptAt != nil {
				next = ", next attempt " + d.NextAttemptAt.Local().Format(time.RFC3339)
			}
			fmt.Fprintf(m.Stdout, "  run %s (%s), branch %s: %s (failed attempts: %d%s): %s\n", d.RunID, d.Status, d.Branch, what, d.Attempts, next, clip(d.LastError, 200))
		}
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
