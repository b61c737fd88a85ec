package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// limitRules keep the model calling a tool (refused: nothing is allowed), so
// every turn runs into its limit, until it is told it may go on.
func limitRules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "a person chose to continue", Reply: fakeapi.Reply{Text: "Finished with the extra budget."}},
		{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}},
	}
}

// answerLimit answers the run's limit question with label when it is asked.
func answerLimit(h *harness, p *person, label string, asked chan<- questions.Question) {
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion && len(ev.Set.Questions) == 1 && ev.Set.Questions[0].Header == "Budget" {
				asked <- ev.Set.Questions[0]
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{label}}}
				return
			}
		}
	}()
}

func TestBudgetStopAnsweredContinueFinishes(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{MaxCostUSD: 0.001}, runner.Limits{}, limitRules()...)
	asked := make(chan questions.Question, 1)
	answerLimit(h, p, "Continue", asked)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Finished with the extra budget." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	q := <-asked
	// The CLI's fake turns cost $0.0008 each: two calls go over $0.001.
	if want := "Spent $0.0016 over 2 turns on \"Work on spec Y\"; continue with another $0.001?"; q.Text != want {
		t.Fatalf("question = %q, want %q", q.Text, want)
	}
	if len(q.Options) != 2 || q.Options[0].Label != "Continue" || q.Options[1].Label != "Stop" {
		t.Fatalf("options = %+v", q.Options)
	}
	turns, _ := h.store.Turns(context.Background(), run.ID)
	if len(turns) != 2 || turns[0].Result.Category != executor.CategoryMaxBudget || turns[1].Kind != store.TurnAnswer || !turns[1].Resume {
		t.Fatalf("turns = %+v", turns)
	}
	if !strings.Contains(turns[1].Prompt, "a person chose to continue") || !strings.Contains(turns[1].Prompt, turns[1].SetID) {
		t.Fatalf("continue prompt = %q", turns[1].Prompt)
	}
	if run.CostUSD < 0.0016 {
		t.Fatalf("run cost = %v, want the cost of all turns kept", run.CostUSD)
	}
}

func TestTurnLimitAnsweredStopEndsStopped(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{MaxTurns: 1}, runner.Limits{}, limitRules()...)
	asked := make(chan questions.Question, 1)
	answerLimit(h, p, "Stop", asked)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunStopped {
		t.Fatalf("run = %s %q %q, %v; want stopped", run.Status, run.FinalText, run.Error, err)
	}
	q := <-asked
	if want := "Spent $0.0008 over 2 turns on \"Work on spec Y\"; continue with another 1 turn?"; q.Text != want {
		t.Fatalf("question = %q, want %q", q.Text, want)
	}
	if !strings.Contains(run.Error, "test-user chose Stop") {
		t.Fatalf("run error = %q", run.Error)
	}
	turns, _ := h.store.Turns(context.Background(), run.ID)
	if len(turns) != 1 || turns[0].Result.Category != executor.CategoryMaxTurns {
		t.Fatalf("turns = %+v", turns)
	}
}

func TestTurnLimitPresetContinue(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{MaxTurns: 1, Presets: []runner.Preset{{Match: "budget", Answer: "Continue"}}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{}, limitRules()...)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Finished with the extra budget." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	if asked, _, _, _ := p.stats(); asked != 0 {
		t.Fatalf("asked %d times; the preset answers", asked)
	}
}

func TestLimitQuestionTimeoutStops(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{MaxTurns: 1, QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: "skip"}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{}, limitRules()...)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunStopped || !strings.Contains(run.Error, "chose Stop") {
		t.Fatalf("run = %s %q %q, %v; want stopped", run.Status, run.FinalText, run.Error, err)
	}
}

// TestLimitQuestionAnsweredInAdvanceIsAQuestionRound: the run's own question
// whether to go on, answered by a preset, counts against
// run.max_question_rounds like the model's questions: one automatic
// Continue and one question of the model fit in two rounds.
func TestLimitQuestionAnsweredInAdvanceIsAQuestionRound(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{MaxTurns: 1, Presets: []runner.Preset{{Match: "Budget", Answer: "Continue"}, {Match: "Auth", Answer: "JWT"}}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{MaxQuestionRounds: 2},
		fakeapi.Rule{When: "a person chose to continue", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		fakeapi.Rule{When: "BEGIN ANSWERS", Reply: fakeapi.Reply{Text: "Implemented with JWT."}},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}},
	)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Implemented with JWT." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
}

// neverEnds is a model that keeps calling a tool: every turn runs into its
// limit, whatever it is told.
func neverEnds() []fakeapi.Rule {
	return []fakeapi.Rule{{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}}}
}

// TestPresetContinueStopsAtQuestionRounds: answers: {Budget: Continue} with
// a model that never ends: each automatic Continue is a round of
// run.max_question_rounds, and the run fails when they are used up.
func TestPresetContinueStopsAtQuestionRounds(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{MaxTurns: 1, Presets: []runner.Preset{{Match: "Budget", Answer: "Continue"}}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{MaxQuestionRounds: 3}, neverEnds()...)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunFailed || !strings.Contains(run.Error, "run.max_question_rounds 3") {
		t.Fatalf("run = %s %q, %v; want failed at run.max_question_rounds", run.Status, run.Error, err)
	}
	turns, _ := h.store.Turns(context.Background(), run.ID)
	if len(turns) != 4 { // the first turn and three automatic Continues
		t.Fatalf("%d turns, want 4", len(turns))
	}
	if asked, _, _, _ := p.stats(); asked != 0 {
		t.Fatalf("asked %d times; the preset answers", asked)
	}
}

// TestPresetContinueNeverSpendsPastTheCeiling: answers: {Budget: Continue}
// with a budget: the run never spends more than max_cost_usd times
// run.max_question_rounds.
func TestPresetContinueNeverSpendsPastTheCeiling(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	// Each call of the fake costs $0.0008: two calls a turn reach $0.0016.
	pol := runner.Policy{MaxCostUSD: 0.0016, Presets: []runner.Preset{{Match: "Budget", Answer: "Continue"}}}
	h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{MaxQuestionRounds: 3}, neverEnds()...)
	run, err := h.drive("Work on spec Y")
	if err != nil || run.Status != store.RunFailed || !strings.Contains(run.Error, "run.max_question_rounds 3") {
		t.Fatalf("run = %s %q, %v; want failed at its ceiling", run.Status, run.Error, err)
	}
	if ceiling := 0.0016 * 3; run.CostUSD > ceiling+1e-9 {
		t.Fatalf("run spent $%v, more than its ceiling $%v", run.CostUSD, ceiling)
	}
	if len(h.fake.Requests()) > 6 {
		t.Fatalf("%d calls of the model, want at most 6 ($0.0048 at $0.0008 each)", len(h.fake.Requests()))
	}
}
