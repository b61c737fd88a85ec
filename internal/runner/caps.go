package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Spend caps across runs (issue 27): what all runs together may spend in a
// day and a month (limits.cost_usd_per_day, limits.cost_usd_per_month), and
// what one spec's runs may spend in a day (max_cost_usd_per_day). Spend is
// the sum of the turns' own costs (cost.go) by when they finished (store
// spend.go). Before a turn starts (before anything of it, its worktree
// included) the caps are read: past one, no agent CLI starts; the run asks
// its surfaces, as a question set of kind questions.KindCap stored like the
// others (so every surface, the web inbox, `orchestrator answer`, presets,
// reminders and timeouts apply, and it is durable across restarts and
// instances), whether to raise that cap once by its amount (Continue) or to
// stop. A turn under every cap gets --max-budget-usd for what is left of
// the tightest, reserved in the store as it begins (store.BeginTurn): a
// turn that runs counts as having spent its budget until it finishes and
// its cost replaces the reservation, so runs starting at once never each
// take what is left (the later asks). Should a turn stop at its budget,
// the run goes on with a turn that finds the cap reached, and asks.
const (
	capHeader   = "Spend cap"
	capContinue = limitContinue
	capStop     = limitStop
	// Periods of a cap.
	capDay   = "day"
	capMonth = "month"
)

// CategorySpendCap is the category of a turn stopped at --max-budget-usd
// when that budget was what was left of a spend cap (not the run's own
// max_cost_usd): the run goes on with a turn that asks about the cap.
const CategorySpendCap executor.Category = "spend_cap"

// capContinuePrompt resumes a session whose turn stopped at a spend cap,
// once the cap was raised.
const capContinuePrompt = "Your last turn was stopped at a spend cap, and a person chose to continue. Continue the task from where you left off."

// Caps are the spend caps on all runs together (limits.*); a spec's own
// daily cap is Policy.MaxCostUSDPerDay. Zero: no cap.
type Caps struct {
	DayUSD   float64
	MonthUSD float64
	// Location is where days and months begin (limits.timezone); nil: UTC.
	Location *time.Location
}

// capStopped reclassifies the outcome of a turn that stopped at
// --max-budget-usd when that budget was what was left of a spend cap: the
// CLI checks its budget after each API call, so a turn whose last call
// crossed the cap stops there even when the model had ended its turn
// (stop_reason end_turn): such a turn succeeded, its text is its final
// text (the questions in it are asked as usual). Otherwise the turn was
// cut short: CategorySpendCap, and the next turn asks about the cap.
func capStopped(out *executor.Outcome, col *questions.TurnCollector) {
	if out.Result != nil && out.Result.StopReason == "end_turn" {
		out.Status, out.Category, out.Error, out.FullError = executor.StatusSuccess, "", "", ""
		if out.FinalText == "" {
			out.FinalText = col.Text()
		}
		return
	}
	out.Category = CategorySpendCap
}

// CapState is one cap as it stands: what was spent in its period against
// its amount and what people raised it by.
type CapState struct {
	Scope  string // store.CapScopeAll, or the spec's name
	Period string // "day" or "month"
	Start  time.Time
	End    time.Time
	Amount float64 // the configured cap
	Raised float64 // raised by Continue at cap questions this period
	Raises int
	Spent  float64
}

// Limit is the cap of the period, raises included.
func (c CapState) Limit() float64 { return c.Amount + c.Raised }

// Left is what may still be spent in the period (negative when over).
func (c CapState) Left() float64 { return c.Limit() - c.Spent }

// Reached reports whether nothing more may be spent.
func (c CapState) Reached() bool { return c.Left() <= 1e-9 }

// key names the cap's question of this period and raise: a raised cap that
// is reached again asks again.
func (c CapState) key() string {
	return fmt.Sprintf("spend-cap:%s:%s:%d:%d", c.Scope, c.Period, c.Start.Unix(), c.Raises)
}

// capSetID is the ID of the cap question of run for state c.
func capSetID(runID string, c CapState) string { return questions.ToolSetID(runID, c.key()) }

// PeriodOf is the day ("day") or month ("month") that holds t, in loc.
func PeriodOf(period string, t time.Time, loc *time.Location) (start, end time.Time) {
	t = t.In(loc)
	if period == capMonth {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	return start, start.AddDate(0, 0, 1)
}

// CapStates are the caps that apply to a run of spec ("" for a run of a
// prompt) whose spec caps its day at perDay (0: none), as they stand now:
// the spec's day first, then all runs' day and month.
func (r *Runner) CapStates(ctx context.Context, spec string, perDay float64) ([]CapState, error) {
	caps := r.cfg.Caps
	loc := caps.Location
	if loc == nil {
		loc = time.UTC
	}
	now := r.cfg.Now()
	var out []CapState
	add := func(scope, period string, amount float64) error {
		if amount <= 0 {
			return nil
		}
		c := CapState{Scope: scope, Period: period, Amount: amount}
		c.Start, c.End = PeriodOf(period, now, loc)
		var err error
		if c.Spent, err = r.cfg.Store.Spend(ctx, scope, c.Start, c.End); err != nil {
			return err
		}
		if c.Raised, c.Raises, err = r.cfg.Store.CapRaises(ctx, scope, period, c.Start); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	}
	if spec != "" {
		if err := add(spec, capDay, perDay); err != nil {
			return nil, err
		}
	}
	if err := add(store.CapScopeAll, capDay, caps.DayUSD); err != nil {
		return nil, err
	}
	if err := add(store.CapScopeAll, capMonth, caps.MonthUSD); err != nil {
		return nil, err
	}
	return out, nil
}

// errCapAsked stops a turn before it starts: the run reached a spend cap
// and asks (or asked) about it; the loop's next step waits for the answer.
var errCapAsked = errors.New("a spend cap is reached")

// checkCaps reads the spend caps of a turn of run before the turn starts
// anything, and returns those that apply (none: no cap). A cap reached
// makes it ask the cap's question, wait for it (or park), and carry out
// its answer: errCapAsked when the turn must not start (the loop takes its
// next step, which finds the run stopped, or waiting, or the cap raised).
// The turn then reserves what it may spend under the caps as it begins
// (capTurn, store.BeginTurn): two turns that pass this check at once do
// not both get what is left.
func (r *Runner) checkCaps(ctx context.Context, d *drive, run store.Run) ([]CapState, error) {
	if r.cfg.Caps.DayUSD <= 0 && r.cfg.Caps.MonthUSD <= 0 && d.Policy.MaxCostUSDPerDay <= 0 {
		return nil, nil
	}
	busySince := time.Time{}
	for round := 0; round < 8; { // each round raises a cap, or returns
		states, err := r.CapStates(ctx, run.Spec, d.Policy.MaxCostUSDPerDay)
		if err != nil {
			return nil, err
		}
		var reached *CapState
		for i, c := range states {
			if c.Reached() {
				reached = &states[i]
				break
			}
		}
		if reached == nil {
			return states, nil
		}
		// What is left is reserved by turns still running, not spent:
		// wait for them (their cost replaces their reservation), up to
		// capBusyWait; the run asks once the money is spent.
		if busy, err := r.capBusy(ctx, *reached); err != nil {
			return nil, err
		} else if busy && (busySince.IsZero() || time.Since(busySince) < capBusyWait) {
			if busySince.IsZero() {
				busySince = time.Now()
				r.log.Info("spend cap: what is left is reserved by turns still running; the run waits for them",
					"run", run.ID, "cap", capName(*reached), "limit", reached.Limit())
				r.emit(Event{Kind: EventRetry, RunID: run.ID, Text: fmt.Sprintf("what is left of %s is reserved by turns still running; waiting for them to finish", capName(*reached))})
			}
			if err := r.cfg.Sleep(ctx, capBusyPoll); err != nil {
				return nil, err
			}
			continue
		}
		round++
		id := capSetID(run.ID, *reached)
		rec, err := r.cfg.Store.QuestionSet(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			set := r.capSet(run, *reached)
			if res, err := r.cfg.Store.Reserved(ctx, reached.Scope, reached.Start, reached.End); err != nil {
				return nil, err
			} else if res > 0 {
				set.Context += fmt.Sprintf(" Of that, %s is reserved by turns still running: the budget each was given, until it finishes and its cost replaces it.", usd(res))
			}
			markDefault(&set, d.Policy)
			if _, err := r.cfg.Store.AskRun(context.WithoutCancel(ctx), set, run.Surfaces); err != nil {
				return nil, err
			}
			r.log.Warn("spend cap reached: the run asks whether to raise it", "run", run.ID, "spec", run.Spec,
				"cap", capName(*reached), "spent", reached.Spent, "limit", reached.Limit(), "set", set.ID)
			r.emit(Event{Kind: EventCapReached, RunID: run.ID, Set: &set, Text: set.Context})
			r.cfg.Failpoint("question-stored")
			return nil, errCapAsked // the loop waits for it (or parks)
		case err != nil:
			return nil, err
		}
		switch rec.State {
		case store.SetPending:
			if r.cfg.Park {
				return nil, fmt.Errorf("run %s, question set %s: %w", run.ID, rec.Set.ID, ErrParked)
			}
			if err := r.wait(ctx, d, run, rec); err != nil {
				return nil, err
			}
			return nil, errCapAsked // the loop carries out the answer
		case store.SetAnswered:
			if err := r.afterCap(ctx, d.Policy, run, rec); err != nil {
				return nil, err
			}
			if latest, err := r.cfg.Store.Run(ctx, run.ID); err != nil {
				return nil, err
			} else if latest.Status.Final() {
				return nil, errCapAsked
			}
		default:
			// Expired (the run failed or was cancelled), or carried out
			// already: the loop finds out where the run stands.
			return nil, errCapAsked
		}
	}
	return nil, fmt.Errorf("run %s: the spend caps are still reached after raising them", run.ID)
}

// capBusyPoll is how often a run whose cap is reserved by turns still
// running looks again; capBusyWait is how long it waits for them before it
// asks (a turn whose process died holds its reservation until its run is
// recovered or cancelled).
const (
	capBusyPoll = 2 * time.Second
	capBusyWait = 30 * time.Minute
)

// capBusy reports whether c is reached only by the reservations of turns
// still running: what was spent is under its limit.
func (r *Runner) capBusy(ctx context.Context, c CapState) (bool, error) {
	res, err := r.cfg.Store.Reserved(ctx, c.Scope, c.Start, c.End)
	if err != nil {
		return false, err
	}
	return res > 0 && c.Limit()-(c.Spent-res) > 1e-9, nil
}

// capTurn fills in the caps t begins under (store.BeginTurn reserves
// its budget of them) and its own budget, what is left of the run's
// max_cost_usd: the turn reserves the lesser of that and what is left of
// the tightest cap.
func (r *Runner) capTurn(ctx context.Context, d *drive, run store.Run, t store.Turn, caps []CapState) (store.Turn, error) {
	for _, c := range caps {
		t.Caps = append(t.Caps, store.CapLimit{Scope: c.Scope, From: c.Start, To: c.End, Limit: c.Limit()})
	}
	if d.Policy.MaxCostUSD > 0 {
		turns, err := r.cfg.Store.Turns(ctx, run.ID)
		if err != nil {
			return t, err
		}
		t.BudgetUSD = budgetLeft(d.Policy, run.ID, turns, r.cfg.Limits.MaxQuestionRounds)
	}
	return t, nil
}

// capName says which cap: "the spec nightly-deps's daily cap", "the daily
// cap of all runs (limits.cost_usd_per_day)".
func capName(c CapState) string {
	switch {
	case c.Scope != store.CapScopeAll:
		return "max_cost_usd_per_day of spec " + c.Scope
	case c.Period == capMonth:
		return "limits.cost_usd_per_month"
	}
	return "limits.cost_usd_per_day"
}

// usd writes dollars with cents, and more digits for amounts below a cent.
func usd(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// capSet is the question a run that reached cap c asks: "the spec
// nightly-deps has spent $5.00 of its $5.00 today: Continue (raise today's
// cap by $5.00) / Stop".
func (r *Runner) capSet(run store.Run, c CapState) questions.Set {
	when, period := "today", "today's"
	if c.Period == capMonth {
		when, period = "this month", "this month's"
	}
	var text string
	if c.Scope != store.CapScopeAll {
		text = fmt.Sprintf("the spec %s has spent %s of its %s %s", c.Scope, usd(c.Spent), usd(c.Limit()), when)
	} else {
		text = fmt.Sprintf("all runs have spent %s of their %s %s (%s)", usd(c.Spent), usd(c.Limit()), when, capName(c))
	}
	q := questions.Question{
		Header: capHeader,
		Text:   text + ": continue?",
		Options: []questions.Option{
			{Label: capContinue, Description: fmt.Sprintf("Raise %s cap by %s, once, and go on", period, usd(c.Amount))},
			{Label: capStop, Description: "End the run as stopped"},
		},
	}
	key := c.key()
	set := questions.NewSet(run.ID+"\x00"+key, 0, []questions.Question{q})
	set.ID, set.RunID, set.Kind = capSetID(run.ID, c), run.ID, questions.KindCap
	set.Title = run.Title
	set.Context = fmt.Sprintf("No agent was started: %s is reached (%s of %s spent %s).", capName(c), usd(c.Spent), usd(c.Limit()), when)
	return set
}

// afterCap carries out the answer to a cap question: Continue raises the
// cap it asked about once (store.RaiseCap; a cap whose period is over by
// now is not raised: the new period has its own), Stop ends the run
// stopped. Either way the set's answer is consumed here, never handed to
// the model.
func (r *Runner) afterCap(ctx context.Context, pol Policy, run store.Run, rec store.SetRecord) error {
	choice := choiceOf(rec)
	if choice != capContinue {
		q := ""
		if len(rec.Set.Questions) > 0 {
			q = rec.Set.Questions[0].Text
		}
		msg := fmt.Sprintf("%s chose %s at %q (question set %s)", questions.Printable(rec.Response.By), orUnknown(choice), questions.Printable(q), rec.Set.ID)
		ctx = context.WithoutCancel(ctx)
		if err := r.cfg.Store.ConsumeSet(ctx, run.ID, rec.Set.ID); err != nil {
			return err
		}
		return r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunStopped, Error: &msg})
	}
	states, err := r.CapStates(ctx, run.Spec, pol.MaxCostUSDPerDay)
	if err != nil {
		return err
	}
	for _, c := range states {
		if capSetID(run.ID, c) == rec.Set.ID {
			raised, err := r.cfg.Store.RaiseCap(ctx, run.ID, rec.Set.ID, c.Scope, c.Period, c.Start, c.Amount)
			if err != nil {
				return err
			}
			if raised {
				r.log.Info("spend cap raised", "run", run.ID, "cap", capName(c), "by", c.Amount, "to", c.Limit()+c.Amount,
					"by_whom", questions.Printable(rec.Response.By), "set", rec.Set.ID)
			}
			return nil
		}
	}
	return r.cfg.Store.ConsumeSet(ctx, run.ID, rec.Set.ID)
}

// CapSkip says why a tick of a scheduled spec starts no run ("" when it
// may): one of its caps is reached, and a run of the spec asked about it
// in the cap's period already (the question waits, or was answered Stop).
// So a schedule past its cap asks once per cap period, not once per tick.
func (r *Runner) CapSkip(ctx context.Context, spec string, perDay float64) (string, error) {
	if r.cfg.Caps.DayUSD <= 0 && r.cfg.Caps.MonthUSD <= 0 && perDay <= 0 {
		return "", nil
	}
	states, err := r.CapStates(ctx, spec, perDay)
	if err != nil {
		return "", err
	}
	for _, c := range states {
		if !c.Reached() {
			continue
		}
		sets, err := r.cfg.Store.CapSets(ctx, spec, c.Start)
		if err != nil {
			return "", err
		}
		if len(sets) > 0 {
			return fmt.Sprintf("%s is reached (%s of %s spent) and a run of the spec asked about it already (question set %s)",
				capName(c), usd(c.Spent), usd(c.Limit()), sets[len(sets)-1].Set.ID), nil
		}
	}
	return "", nil
}
