package runner

import (
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func TestBudgetLeftGrantsAsMuchAgainFromEachContinue(t *testing.T) {
	pol := Policy{MaxCostUSD: 1}
	stop := store.Turn{Seq: 1, Finished: true, Result: store.TurnResult{Category: executor.CategoryMaxBudget, CostUSD: 1.25}}
	cont := store.Turn{Seq: 2, Kind: store.TurnAnswer, SetID: questions.SetID("r1", 1), Finished: true, Result: store.TurnResult{CostUSD: 0.5}}
	for _, tc := range []struct {
		name  string
		turns []store.Turn
		want  float64
	}{
		{"no turn yet", nil, 1},
		{"some spent", []store.Turn{{Seq: 1, Finished: true, Result: store.TurnResult{CostUSD: 0.25}}}, 0.75},
		{"over the limit: the smallest budget", []store.Turn{stop}, 0.0001},
		{"after Continue: as much again from the stop", []store.Turn{stop, cont}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := budgetLeft(pol, "r1", tc.turns, 0); got != tc.want {
				t.Fatalf("budgetLeft = %v, want %v", got, tc.want)
			}
		})
	}
	// With run.max_question_rounds 2 the run's ceiling is $2: after the
	// Continue only $0.25 is left of it.
	if got := budgetLeft(pol, "r1", []store.Turn{stop, cont}, 2); got != 0.25 {
		t.Fatalf("budgetLeft under a ceiling = %v, want 0.25", got)
	}
}
