package runner

import (
	"context"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestLimitSetKind: a limit question says so by its kind, read from the set
// without the run's turns; a set stored before limit sets had a kind (no
// kind, the limit question's header) is told by the turn that stopped on a
// limit; a question of the model's with the same header is not one.
func TestLimitSetKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := New(Config{Store: st, Resolve: func(store.Run) (Resolved, error) { return Resolved{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	budget := func(seq int) questions.Set {
		return questions.NewSet("r1", seq, []questions.Question{{Header: limitHeader, Text: "Go on?",
			Options: []questions.Option{{Label: limitContinue}, {Label: limitStop}}}})
	}
	// Turn 1 stopped at the budget and left a set without a kind (as
	// before limit sets had one); turn 2 is the model asking a question
	// with the same header.
	for _, tc := range []struct {
		cat executor.Category
	}{{executor.CategoryMaxBudget}, {""}} {
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: "r1", Kind: store.TurnStart, Prompt: "p"})
		if err != nil {
			t.Fatal(err)
		}
		set := budget(turn.Seq)
		if err := st.FinishTurn(ctx, "r1", turn.Seq, store.TurnResult{Status: "success", Category: tc.cat}, &set, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "x", Surface: "test",
			Answers: []questions.Answer{{QuestionID: set.Questions[0].ID, Labels: []string{limitContinue}}}}); err != nil {
			t.Fatal(err)
		}
	}
	marked := budget(9)
	marked.Kind = questions.KindLimit
	for _, tc := range []struct {
		name string
		set  questions.Set
		want bool
	}{
		{"kind limit", marked, true},
		{"stored without a kind, its turn stopped at the budget", budget(1), true},
		{"the model's question with the same header", budget(2), false},
		{"a marker's set", func() questions.Set { s := budget(1); s.Kind = questions.KindMarker; return s }(), false},
	} {
		got, err := r.isLimitSet(ctx, tc.set)
		if err != nil || got != tc.want {
			t.Errorf("%s: isLimitSet = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
