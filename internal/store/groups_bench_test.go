package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// BenchmarkGroup: the runs a question also waits in, as a surface reads
// them when it shows the question (at most 11), among 10,000 waiting runs
// of which 100 ask the same question.
func BenchmarkGroup(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.SeedWaitingRuns(ctx, Seed{Prefix: "w-", Runs: 10000}); err != nil {
		b.Fatal(err)
	}
	var first questions.Set
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("g%03d", i)
		if _, err := s.CreateRun(ctx, Run{ID: id, Spec: "spec-" + id, Prompt: "p"}); err != nil {
			b.Fatal(err)
		}
		turn, err := s.BeginTurn(ctx, Turn{RunID: id, Kind: TurnStart, Prompt: "p", SessionID: "s"})
		if err != nil {
			b.Fatal(err)
		}
		set := questions.NewSet(id, turn.Seq, []questions.Question{{Text: "Upgrade to pgx v5?", Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}})
		if err := s.FinishTurn(ctx, id, turn.Seq, TurnResult{Status: "success"}, &set, []string{"terminal"}); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = set
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := s.Group(ctx, first.ID, questions.GroupShown+1)
		if err != nil || len(g) != questions.GroupShown+1 {
			b.Fatalf("group = %d, %v", len(g), err)
		}
	}
}
