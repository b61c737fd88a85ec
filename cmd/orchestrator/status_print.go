package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// printStatus prints what gatherStatus read, for people.
func printStatus(out io.Writer, rep statusReport) {
	if rep.waiting {
		if rep.Counts.QuestionSets == 0 {
			fmt.Fprintln(out, "No questions waiting for an answer.")
		}
		printPendingQuestions(out, rep)
		return
	}
	printServe(out, rep)
	printCounts(out, rep.Counts)
	printStatusRuns(out, rep)
	printPendingQuestions(out, rep)
	printSchedule(out, rep.Schedule)
	printScheduleHealth(out, rep.Schedule) // schedule.go
	if len(rep.Specs) > 0 {
		fmt.Fprintln(out)
		w := newTable(out)
		fmt.Fprintln(w, "SPEC\tRUNS\tCOST\tLAST RUN")
		for _, s := range rep.Specs {
			fmt.Fprintf(w, "%s\t%d\t$%.4f\t%s\n", s.Spec, s.Runs, s.CostUSD, s.LastStatus)
		}
		w.Flush()
	}
	printSpend(out, rep.Spend) // status_spend.go
	printPendingDeliveries(out, rep.Deliveries)
	printWorktrees(out, rep.Worktrees)
	printStateDir(out, rep.StateDir) // retention.go
}

// newTable is the writer of status's tables.
func newTable(out io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 4, 2, ' ', 0) }

// printServe says whether serve runs, or which instances share the store.
func printServe(out io.Writer, rep statusReport) {
	switch s := rep.Serve; {
	case rep.shared:
		// The state directory's probe says nothing of the instances on
		// other machines: the leases below do.
		fmt.Fprintf(out, "serve: %d instance(s) on this PostgreSQL database (database_url); each active run below says which drives it\n", len(rep.Instances))
		for _, in := range rep.Instances {
			role := ""
			if in.Leader {
				role = ", leader"
			}
			fmt.Fprintf(out, "  %s (driving %d%s, last seen %s)\n", in.ID, in.Driving, role, in.HeartbeatAt.Local().Format(time.RFC3339))
		}
		fmt.Fprintln(out)
	case s.State == "running":
		if s.PID > 0 {
			fmt.Fprintf(out, "serve: running on this state directory (pid %d)\n\n", s.PID)
		} else {
			fmt.Fprint(out, "serve: running on this state directory\n\n")
		}
	case s.State == "stopped":
		fmt.Fprint(out, "serve: not running on this state directory (scheduled specs do not run, answered runs wait for 'orchestrator resume')\n\n")
	default:
		fmt.Fprintf(out, "serve: unknown (%s)\n\n", s.Note)
	}
}

// printCounts says how many runs there are in each status, and how many
// question sets wait for an answer.
func printCounts(out io.Writer, c statusCounts) {
	if len(c.Runs) == 0 {
		return
	}
	var parts []string
	for _, st := range []store.RunStatus{store.RunQueued, store.RunRunning, store.RunWaiting, store.RunInterrupted,
		store.RunDone, store.RunFailed, store.RunCancelled, store.RunStopped} {
		if n := c.Runs[string(st)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	fmt.Fprintf(out, "Runs: %s; question sets waiting for an answer: %d\n\n", strings.Join(parts, ", "), c.QuestionSets)
}

// printStatusRuns lists the runs, then where each stays when several
// instances share the store.
func printStatusRuns(out io.Writer, rep statusReport) {
	w := newTable(out)
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "No active runs.")
	} else {
		fmt.Fprintln(w, "RUN\tSTATUS\tSPEC\tTITLE\tCOST\tUPDATED")
		for _, r := range rep.Runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t$%.4f\t%s\n", r.ID, r.Status, dash(r.Spec), clip(r.Title, 48), r.CostUSD, r.UpdatedAt.Local().Format(time.RFC3339))
		}
	}
	w.Flush()
	if rep.More.Runs > 0 {
		fmt.Fprintf(out, "… and %d more runs (orchestrator status --all, or --spec S, or --limit N)\n", rep.More.Runs)
	}
	wip := map[string]statusDelivery{}
	for _, d := range rep.Deliveries {
		if d.What == "work_in_progress" {
			wip[d.RunID] = d
		}
	}
	for _, r := range rep.Runs {
		// Several instances on one database: say where a run is.
		parked := r.Status == string(store.RunWaiting) || r.Status == string(store.RunInterrupted) || r.Status == string(store.RunQueued)
		switch d, unpushed := wip[r.ID]; {
		case r.DrivenBy != "":
			fmt.Fprintf(out, "run %s: driven by instance %s\n", r.ID, r.DrivenBy)
		case unpushed && parked:
			fmt.Fprintf(out, "run %s: stays with host %s, whose checkout alone has its work in progress (commit %.12s on branch %s): "+
				"the push of it failed; it goes on there, or anywhere once a push succeeds\n", r.ID, r.Host, d.Commit, d.Branch)
		case r.Host != "" && parked:
			fmt.Fprintf(out, "run %s: stays with host %s, which holds its working directory (its work is not delivered through git)\n", r.ID, r.Host)
		}
	}
}

// printPendingQuestions lists the questions not answered yet, and how many
// more sets wait.
func printPendingQuestions(out io.Writer, rep statusReport) {
	pending := pendingQuestions(rep.QuestionSets)
	if len(pending) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := newTable(out)
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
	if rep.More.QuestionSets > 0 {
		fmt.Fprintf(out, "… and %d more waiting question sets (orchestrator status --waiting --all, or --spec S)\n", rep.More.QuestionSets)
	}
	fmt.Fprintln(out, "\nAnswer with: orchestrator answer QUESTION TEXT")
}

// printSchedule says when the scheduled specs run next.
func printSchedule(out io.Writer, schedule []statusNext) {
	if len(schedule) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := newTable(out)
	fmt.Fprintln(w, "SPEC\tNEXT RUN")
	for _, s := range schedule {
		if s.Paused != nil {
			fmt.Fprintf(w, "%s\tpaused (%s)\n", s.Spec, s.Paused.Reason)
			continue
		}
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

// printPendingDeliveries lists the pushes and pull requests that failed
// and are tried again.
func printPendingDeliveries(out io.Writer, deliveries []statusDelivery) {
	var pend []statusDelivery
	for _, d := range deliveries {
		if d.What != "work_in_progress" {
			pend = append(pend, d)
		}
	}
	if len(pend) == 0 {
		return
	}
	fmt.Fprintln(out, "\nPending deliveries (serve tries them again; or now: orchestrator resume RUN):")
	for _, d := range pend {
		what := "the branch is not pushed yet"
		if d.What == "pull_request" {
			what = "the pull request is not opened yet"
		}
		next := ""
		if d.NextAttemptAt != nil {
			next = ", next attempt " + d.NextAttemptAt.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "  run %s (%s), branch %s: %s (failed attempts: %d%s): %s\n", d.RunID, d.Status, d.Branch, what, d.Attempts, next, clip(d.LastError, 200))
	}
}
