package runner_test

import (
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// statementsPerRoundBefore is what one question round cost before the store
// decided an offered answer in one transaction (issue 22): the statements of
// a run that asks one question, answered on a surface, less those of a run
// that asks none, measured by TestStatementsPerQuestionRound.
const statementsPerRoundBefore = 58

// TestStatementsPerQuestionRound counts the store's statements
// (store.Statements) of a run that asks one question, answered at once on a
// surface, and of a run that asks none: the difference is what one round
// of questions costs. The ask room reads a waiting set again when it sees
// it before the answer lands, and not when after: that depends on timing,
// so each run is counted three times and the fewest statements count.
func TestStatementsPerQuestionRound(t *testing.T) {
	t.Parallel()
	count := func(prompt string, rs []fakeapi.Rule) int64 {
		p := newPerson("test")
		h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{}, rs...)
		go func() {
			for ev := range h.events {
				if ev.Kind == runner.EventQuestion {
					p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
					return
				}
			}
		}()
		before := h.store.Statements()
		run, err := h.drive(prompt)
		if err != nil || run.Status != store.RunDone {
			t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
		}
		return h.store.Statements() - before
	}
	fewest := func(prompt string, rs func() []fakeapi.Rule) int64 {
		var n int64
		for i := range 3 {
			if c := count(prompt, rs()); i == 0 || c < n {
				n = c
			}
		}
		return n
	}
	plain := fewest("Just do it", func() []fakeapi.Rule { return []fakeapi.Rule{{Reply: fakeapi.Reply{Text: "Done."}}} })
	asked := fewest("Implement spec X", rules)
	round := asked - plain
	t.Logf("statements: run without a question %d, with one question round %d: %d per round (before: %d)", plain, asked, round, statementsPerRoundBefore)
	if statementsPerRoundBefore > 0 && round*3 > statementsPerRoundBefore*2 {
		t.Errorf("one question round costs %d statements; want at most two thirds of the %d it cost before", round, statementsPerRoundBefore)
	}
}
