package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newStatusCmd() *cobra.Command {
	var asJSON bool
	var q statusQuery
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List runs and the questions waiting for an answer",
		Long: `status says whether a serve is running on this state directory, counts the
runs by status and the question sets waiting for an answer, lists the newest
active runs (running, waiting, interrupted) and the newest questions waiting
for an answer with their IDs and surfaces (20 of each; "and N more" says
how many are not listed), and when the scheduled specs in specs.dir run
next: a spec whose previous run still runs or waits is skipped by the
scheduler, and status says so instead of a time. Each spec's runs are summed
up: how many, what they cost, how the newest ended.
--spec NAME shows only that spec's runs, questions and schedule; --kind
only the questions of that kind (marker, ask_tool, approval, secrets,
limit); --limit N lists N of each; --all lists every one, finished runs
too; --waiting shows only the questions waiting.`,
		Annotations: noSurfacesAnnotation(),
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if q.limit < 0 {
				return usageError(fmt.Errorf("--limit %d: want 0 or more", q.limit))
			}
			for _, k := range q.kinds {
				if !slices.Contains(statusKinds, k) {
					return usageError(fmt.Errorf("--kind %s: want one of %s", k, strings.Join(statusKinds, ", ")))
				}
			}
			if q.all && !cmd.Flags().Changed("limit") {
				q.limit = 0
			}
			return m.runStatus(cmd.Context(), asJSON, q)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&q.all, "all", false, "list every run, finished ones too, and every question waiting")
	cmd.Flags().StringVar(&q.spec, "spec", "", "only this spec's runs, questions and schedule")
	cmd.Flags().IntVar(&q.limit, "limit", defaultStatusLimit, "list at most this many runs and question sets, newest first (0: every one)")
	cmd.Flags().BoolVar(&q.waiting, "waiting", false, "show only the questions waiting for an answer")
	cmd.Flags().StringSliceVar(&q.kinds, "kind", nil, "only the questions of this kind (marker, ask_tool, approval, secrets, limit, spend_cap)")
	return cmd
}

// defaultStatusLimit is how many runs and question sets status lists.
const defaultStatusLimit = 20

// statusKinds are the kinds of question set --kind takes.
var statusKinds = []string{questions.KindMarker, questions.KindAskTool, questions.KindApproval, questions.KindSecrets, questions.KindLimit, questions.KindCap}

// statusCounts are the totals of what status selects, read as sums from
// the store: the runs by status, the question sets waiting.
type statusCounts struct {
	Runs         map[string]int `json:"runs"`
	QuestionSets int            `json:"question_sets"`
}

// statusMore is how many runs and question sets status selects but does
// not list (--limit).
type statusMore struct {
	Runs         int `json:"runs"`
	QuestionSets int `json:"question_sets"`
}

// statusNext is a scheduled spec's next run time, or, when the scheduler
// will skip its ticks, the active run it waits for (Next is then left out).
type statusNext struct {
	Spec         string         `json:"spec"`
	Next         *time.Time     `json:"next,omitempty"`
	SkippedWhile *statusSkipped `json:"skipped_while,omitempty"`
	// Paused is set while the spec's schedule is paused, TicksSkipped
	// counts its ticks that started no run (schedule.go).
	Paused       *statusPause         `json:"paused,omitempty"`
	TicksSkipped []statusTicksSkipped `json:"ticks_skipped,omitempty"`
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
	// Spend is what was spent against each spend cap (status_spend.go).
	Spend []spendRow `json:"spend"`
	// Deliveries are the deliveries still to finish: a done run's push
	// or pull request that failed (pending, tried again), and a waiting
	// run's work in progress that its push did not bring to the remote
	// (the run stays with its host until one does).
	Deliveries []statusDelivery `json:"deliveries"`
	// Instances are the serve instances of a shared database whose
	// heartbeat is recent (two lease TTLs).
	Instances []statusInstance `json:"instances,omitempty"`
	// Counts are the totals of runs and waiting question sets, More how
	// many of them runs and question_sets do not list.
	Counts statusCounts `json:"counts"`
	More   statusMore   `json:"more"`
	// StateDir is the size of the state directory (retention.go); absent
	// with --waiting.
	StateDir *statusStateDir `json:"state_dir,omitempty"`

	shared  bool // the store is a shared PostgreSQL database
	waiting bool // --waiting: only the questions
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

type statusInstance struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Leader      bool      `json:"leader"`
	Driving     int       `json:"driving"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

// statusQuery is what status was asked: the active runs or all, of every
// spec or one, how many to list, the questions of which kinds.
type statusQuery struct {
	all     bool
	spec    string
	limit   int // 0: every one
	waiting bool
	kinds   []string
}

func (m *Main) runStatus(ctx context.Context, asJSON bool, q statusQuery) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	rep, err := m.gatherStatus(ctx, st, q)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(m.Stdout, rep)
	}
	printStatus(m.Stdout, rep)
	return nil
}

// gatherStatus reads what status shows. Its reads are one statement per
// kind of thing (runs, leases, question sets, deliveries…), whatever the
// number of runs (TestStatusReadsDoNotGrowWithRuns).
func (m *Main) gatherStatus(ctx context.Context, st *store.Store, q statusQuery) (statusReport, error) {
	rep := statusReport{V: jsonVersion, Serve: probeServe(st.Dir()), Runs: []jsonRun{}, QuestionSets: []jsonSet{}, Schedule: []statusNext{},
		Specs: []statusSpec{}, Worktrees: []statusWorktree{}, Deliveries: []statusDelivery{}, shared: st.Shared(), waiting: q.waiting,
		Counts: statusCounts{Runs: map[string]int{}}}
	var err error
	if rep.Instances, err = statusInstances(ctx, st); err != nil {
		return rep, err
	}
	var sets []store.SetRecord
	sets, rep.Counts.QuestionSets, err = st.NewestWaitingSets(ctx, store.WaitingFilter{Spec: q.spec, Kind: q.kinds, Limit: q.limit})
	if err != nil {
		return rep, err
	}
	for _, s := range sets {
		rep.QuestionSets = append(rep.QuestionSets, newJSONSetRecord(s))
	}
	rep.More.QuestionSets = rep.Counts.QuestionSets - len(rep.QuestionSets)
	if q.waiting {
		return rep, nil
	}
	rep.StateDir = stateDirSize(st.Dir())
	counts, err := st.RunCounts(ctx, store.AggFilter{Spec: q.spec})
	if err != nil {
		return rep, err
	}
	listed := 0 // of the counted runs, those status lists
	for _, c := range counts {
		rep.Counts.Runs[string(c.Status)] += c.Runs
		if q.all || slices.Contains(activeStatuses, c.Status) {
			listed += c.Runs
		}
	}
	if rep.Runs, err = statusRuns(ctx, st, q); err != nil {
		return rep, err
	}
	rep.More.Runs = max(0, listed-len(rep.Runs))
	list, _ := specs.LoadDir(m.Config.Specs.Dir) // validate reports bad specs; status lists the good ones
	if rep.Schedule, err = statusSchedule(ctx, st, list, q.spec, time.Now()); err != nil {
		return rep, err
	}
	if rep.Schedule, err = statusScheduleHealth(ctx, st, rep.Schedule, q.spec); err != nil {
		return rep, err
	}
	if rep.Spend, err = m.statusSpend(ctx, st, list, q.spec, time.Now()); err != nil { // status_spend.go
		return rep, err
	}
	costs, err := st.SpecCosts(ctx, q.spec)
	if err != nil {
		return rep, err
	}
	for _, c := range costs {
		rep.Specs = append(rep.Specs, statusSpec{Spec: c.Spec, Runs: c.Runs, CostUSD: c.CostUSD, LastStatus: string(c.LastStatus)})
	}
	if rep.Worktrees, err = keptWorktrees(ctx, st); err != nil {
		return rep, err
	}
	if rep.Deliveries, err = statusDeliveries(ctx, st, rep.Runs); err != nil {
		return rep, err
	}
	if q.spec == "" {
		return rep, nil
	}
	known := false
	for _, sp := range list {
		known = known || sp.Name == q.spec
	}
	if !known && len(rep.Runs) == 0 {
		if any, err := st.ListRuns(ctx, store.RunFilter{Spec: q.spec, Limit: 1, Brief: true}); err != nil {
			return rep, err
		} else if len(any) == 0 {
			return rep, usageError(fmt.Errorf("--spec %s: no spec of that name in %s and no run of it", q.spec, m.Config.Specs.Dir))
		}
	}
	rep.Worktrees = slices.DeleteFunc(rep.Worktrees, func(k statusWorktree) bool { return k.Spec != q.spec })
	rep.Deliveries = slices.DeleteFunc(rep.Deliveries, func(d statusDelivery) bool { return d.Spec != q.spec })
	return rep, nil
}

// statusInstances are the instances of a shared store whose heartbeat is
// recent (two lease TTLs); none on SQLite.
func statusInstances(ctx context.Context, st *store.Store) ([]statusInstance, error) {
	if !st.Shared() {
		return nil, nil
	}
	list, err := st.Instances(ctx, time.Now().Add(-2*st.LeaseTTL()))
	if err != nil {
		return nil, err
	}
	var out []statusInstance
	for _, in := range list {
		out = append(out, statusInstance{ID: questions.Printable(in.ID), Host: questions.Printable(in.Host), PID: in.PID,
			Leader: in.Leader, Driving: in.Driving, StartedAt: in.StartedAt, HeartbeatAt: in.HeartbeatAt})
	}
	return out, nil
}

// activeStatuses are the statuses of the runs status lists without --all.
var activeStatuses = []store.RunStatus{store.RunQueued, store.RunRunning, store.RunWaiting, store.RunInterrupted}

// statusRuns are the runs status lists, newest first (at most q.limit),
// each with the instance that drives it on a shared store.
func statusRuns(ctx context.Context, st *store.Store, q statusQuery) ([]jsonRun, error) {
	f := store.RunFilter{Status: activeStatuses, Spec: q.spec, Limit: q.limit}
	if q.all {
		f.Status = nil
	}
	runs, err := st.ListRuns(ctx, f)
	if err != nil {
		return nil, err
	}
	leases, err := st.RunLeases(ctx)
	if err != nil {
		return nil, err
	}
	out := []jsonRun{}
	for _, r := range runs {
		jr := newJSONRun(r)
		if l, ok := leases[r.ID]; ok {
			jr.DrivenBy = questions.Printable(l.Owner)
		}
		out = append(out, jr)
	}
	return out, nil
}

// statusSchedule says when the scheduled specs of list (spec's alone when
// it is not "") run next, after now.
func statusSchedule(ctx context.Context, st *store.Store, list []specs.Spec, spec string, now time.Time) ([]statusNext, error) {
	out := []statusNext{}
	var busy map[string]store.ActiveRun // spec → its newest run that runs or waits
	for _, sp := range list {
		if sp.Schedule == "" || (spec != "" && sp.Name != spec) {
			continue
		}
		sched, err := specs.ParseSchedule(sp.Schedule)
		if err != nil {
			continue
		}
		if busy == nil {
			// The scheduler's rule (internal/daemon: busy): a tick is
			// skipped while a run of the spec runs or waits.
			if busy, err = st.NewestActive(ctx, spec); err != nil {
				return nil, err
			}
		}
		if r, ok := busy[sp.Name]; ok {
			out = append(out, statusNext{Spec: sp.Name, SkippedWhile: &statusSkipped{RunID: r.RunID, Status: string(r.Status)}})
			continue
		}
		next := sched.Next(now).UTC()
		out = append(out, statusNext{Spec: sp.Name, Next: &next})
	}
	return out, nil
}

// statusDeliveries lists the deliveries still to finish (statusReport).
func statusDeliveries(ctx context.Context, st *store.Store, active []jsonRun) ([]statusDelivery, error) {
	out := []statusDelivery{}
	pending, err := st.PendingDeliveries(ctx, time.Now().AddDate(100, 0, 0))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(pending))
	for _, dl := range pending {
		ids = append(ids, dl.RunID)
	}
	runs, err := st.RunsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, dl := range pending {
		run, ok := runs[dl.RunID]
		if !ok {
			return nil, fmt.Errorf("run %s of a pending delivery: %w", dl.RunID, store.ErrNotFound)
		}
		what := "push"
		if dl.Pushed {
			what = "pull_request"
		}
		out = append(out, statusDelivery{RunID: run.ID, Spec: run.Spec, Status: string(run.Status), What: what, Branch: dl.Branch,
			Commit: dl.CommitSHA, Host: questions.Printable(run.Host), Attempts: dl.Attempts, NextAttemptAt: timePtr(dl.NextAttemptAt),
			LastError: questions.Printable(dl.LastError)})
	}
	ids = ids[:0]
	for _, r := range active {
		if r.Host != "" {
			ids = append(ids, r.ID)
		}
	}
	dls, err := st.Deliveries(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range active {
		dl, ok := dls[r.ID]
		if r.Host != "" && ok && dl.State == store.DeliveryPrepared && dl.CommitSHA != "" && !dl.Pushed {
			out = append(out, statusDelivery{RunID: r.ID, Spec: r.Spec, Status: r.Status, What: "work_in_progress", Branch: dl.Branch,
				Commit: dl.CommitSHA, Host: r.Host})
		}
	}
	return out, nil
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
