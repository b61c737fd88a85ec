package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// A turn that stops on the run's budget (max_cost_usd, the CLI's
// --max-budget-usd) or turn limit (max_turns) does not fail the run: the run
// asks its surfaces whether to go on, as one question set stored with the
// turn, so presets, reminders, timeouts and every surface apply as to the
// model's questions. Continue resumes the session with LimitPrompt and as
// much budget and as many turns again; Stop ends the run stopped.
const (
	limitHeader   = "Budget"
	limitContinue = "Continue"
	limitStop     = "Stop"
)

// isLimit reports whether a turn's category is a stop at the run's limits.
func isLimit(c executor.Category) bool {
	return c == executor.CategoryMaxTurns || c == executor.CategoryMaxBudget
}

// limitSetIDs are the IDs of the run's question sets that ask whether to go
// on after a limit stop: the sets of the turns that stopped on one. (A set
// says it itself, by its kind: isLimitSet.)
func limitSetIDs(runID string, turns []store.Turn) map[string]bool {
	ids := map[string]bool{}
	for _, t := range turns {
		if t.Finished && isLimit(t.Result.Category) {
			ids[questions.SetID(runID, t.Seq)] = true
		}
	}
	return ids
}

// isLimitSet reports whether set asks whether to go on after a limit stop:
// its kind says so (questions.KindLimit, stored with the set). A set stored
// before limit sets had a kind of their own (no kind, and the limit
// question's header) is told as it was then, by the turns that stopped on
// a limit.
func (r *Runner) isLimitSet(ctx context.Context, set questions.Set) (bool, error) {
	switch {
	case set.Kind == questions.KindLimit:
		return true, nil
	case set.Kind != "" || len(set.Questions) != 1 || set.Questions[0].Header != limitHeader:
		return false, nil
	}
	turns, err := r.cfg.Store.Turns(ctx, set.RunID)
	if err != nil {
		return false, err
	}
	return limitSetIDs(set.RunID, turns)[set.ID], nil
}

// limitSet is the question a turn that stopped on a limit leaves: "Spent $X
// over N turns on SPEC; continue with another $Y / M turns?".
func (r *Runner) limitSet(ctx context.Context, pol Policy, run store.Run, seq int, out executor.Outcome) (questions.Set, error) {
	turns, err := r.cfg.Store.Turns(ctx, run.ID)
	if err != nil {
		return questions.Set{}, err
	}
	n := out.NumTurns
	for _, t := range turns {
		if t.Finished && t.Seq != seq {
			n += t.Result.NumTurns
		}
	}
	spent := run.CostUSD + out.TurnCostUSD // finish set it to the turn's cost (cost.go)
	name := run.Spec
	if name == "" {
		name = strconv.Quote(run.Title)
	}
	var more []string
	if pol.MaxCostUSD > 0 {
		more = append(more, dollars(pol.MaxCostUSD))
	}
	if pol.MaxTurns > 0 {
		more = append(more, fmt.Sprintf("%d turn%s", pol.MaxTurns, map[bool]string{true: "s"}[pol.MaxTurns != 1]))
	}
	if len(more) == 0 {
		more = append(more, "the same limits")
	}
	another := strings.Join(more, " / ")
	why := "budget"
	if out.Category == executor.CategoryMaxTurns {
		why = "turn limit"
	}
	q := questions.Question{
		Header: limitHeader,
		Text:   fmt.Sprintf("Spent %s over %d turns on %s; continue with another %s?", dollars(spent), n, name, another),
		Options: []questions.Option{
			{Label: limitContinue, Description: "Resume the session with another " + another},
			{Label: limitStop, Description: "End the run as stopped"},
		},
	}
	set := questions.NewSet(run.ID, seq, []questions.Question{q})
	set.Kind = questions.KindLimit
	set.Title = run.Title
	set.Context = fmt.Sprintf("The agent stopped at the run's %s: %s", why, out.Error)
	return set, nil
}

func dollars(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// LimitPrompt is the prompt that resumes a session after a person chose
// Continue at a limit stop. It names the question set (as every answer
// prompt does, for recovery after a crash).
func LimitPrompt(setID string) string {
	return fmt.Sprintf("[answers to question set %s]\nYour last turn was stopped at the run's budget or turn limit, and a person chose to continue with more. Continue the task from where you left off.", setID)
}

// afterLimit carries out the answer to a limit set: Continue resumes the
// session (the turn claims the set, as an answer turn), Stop ends the run.
func (r *Runner) afterLimit(ctx context.Context, d *drive, run store.Run, rec store.SetRecord) error {
	choice := ""
	if len(rec.Response.Answers) > 0 && len(rec.Response.Answers[0].Labels) > 0 {
		choice = rec.Response.Answers[0].Labels[0]
	}
	if choice == limitContinue {
		return r.answerTurn(ctx, d, run, rec, LimitPrompt(rec.Set.ID))
	}
	q := ""
	if len(rec.Set.Questions) > 0 {
		q = rec.Set.Questions[0].Text
	}
	msg := fmt.Sprintf("%s chose %s at %q (question set %s)", questions.Printable(rec.Response.By), orUnknown(choice), questions.Printable(q), rec.Set.ID)
	ctx = context.WithoutCancel(ctx)
	return r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunStopped, Error: &msg})
}

// budgetLeft is what the next turn may spend: the run's max_cost_usd, plus
// as much again from what had been spent at each limit stop answered
// Continue, less what was spent since, and never past the run's ceiling
// (max_cost_usd times rounds, run.max_question_rounds; 0: none). It is at
// least a cent's hundredth, so the CLI always gets a limit (it then stops
// after one API call, and the run asks again or ends at the ceiling).
func budgetLeft(pol Policy, runID string, turns []store.Turn, rounds int) float64 {
	limits := limitSetIDs(runID, turns)
	var spent, base float64
	for _, t := range turns {
		if t.Kind == store.TurnAnswer && limits[t.SetID] {
			base = spent
		}
		spent += t.Result.CostUSD
	}
	left := base + pol.MaxCostUSD - spent
	if rounds > 0 {
		left = min(left, pol.MaxCostUSD*float64(rounds)-spent)
	}
	if left < 0.0001 {
		left = 0.0001
	}
	return left
}

// automatic reports whether a response was given by nobody in person: a
// spec's preset answers or the on_timeout policy.
func automatic(resp questions.Response) bool {
	return resp.Surface == "spec" || resp.Surface == "timeout"
}

// questionRounds is how many rounds of questions count toward
// run.max_question_rounds: every set the model asked, and every limit stop
// answered without a person (a preset such as answers: {Budget: Continue},
// or on_timeout), so that no answer given in advance lifts every limit. A
// limit stop a person answers does not count: that person chose to spend
// more.
func (r *Runner) questionRounds(ctx context.Context, runID string) (int, error) {
	sets, err := r.cfg.Store.QuestionSets(ctx, store.SetFilter{RunID: runID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sets {
		limit, err := r.isLimitSet(ctx, s.Set)
		if err != nil {
			return 0, err
		}
		if !limit || automatic(s.Response) {
			n++
		}
	}
	return n, nil
}

// limitsSpent says why a run that stopped at its limits may not ask to go on
// again ("" when it may): the rounds of questions are used up (a preset
// answering every budget question), or the run has spent its ceiling,
// max_cost_usd times run.max_question_rounds.
func (r *Runner) limitsSpent(ctx context.Context, pol Policy, run store.Run, res store.TurnResult) (string, error) {
	max := r.cfg.Limits.MaxQuestionRounds
	n, err := r.questionRounds(ctx, run.ID)
	if err != nil {
		return "", err
	}
	if n >= max {
		return fmt.Sprintf("the run stopped at its limits after %d rounds of questions, some answered in advance or by on_timeout (run.max_question_rounds %d); it is not asked again", n, max), nil
	}
	if ceiling := pol.MaxCostUSD * float64(max); pol.MaxCostUSD > 0 && run.CostUSD+res.CostUSD >= ceiling {
		return fmt.Sprintf("the run spent %s, its ceiling: max_cost_usd %s times run.max_question_rounds %d", dollars(run.CostUSD+res.CostUSD), dollars(pol.MaxCostUSD), max), nil
	}
	return "", nil
}
