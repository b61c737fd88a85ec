package store

import (
	"context"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestAskRunIsIdempotent: the run's own question is stored once, with its
// kind, and the run waits; asking again leaves it (and its answer) alone.
func TestAskRunIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	newRunningRun(t, s, "r1")
	set := questions.NewSet("r1", 1, []questions.Question{{Header: "Secrets", Text: "Deliver without config.env?",
		Options: []questions.Option{{Label: "Deliver without them"}, {Label: "Stop"}}}})
	set.Kind = questions.KindSecrets
	if created, err := s.AskRun(ctx, set, []string{"terminal"}); err != nil || !created {
		t.Fatalf("AskRun = %v, %v", created, err)
	}
	run, err := s.Run(ctx, "r1")
	if err != nil || run.Status != RunWaiting {
		t.Fatalf("run = %s, %v; want waiting", run.Status, err)
	}
	kinds, err := s.SetKinds(ctx, "r1")
	if err != nil || kinds[set.ID] != questions.KindSecrets {
		t.Fatalf("kinds = %v, %v", kinds, err)
	}
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "terminal",
		Answers: []questions.Answer{{QuestionID: set.Questions[0].ID, Labels: []string{"Stop"}}}}); err != nil {
		t.Fatal(err)
	}
	if created, err := s.AskRun(ctx, set, []string{"terminal"}); err != nil || created {
		t.Fatalf("AskRun again = %v, %v; want not created", created, err)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil || rec.State != SetAnswered || rec.Set.Kind != questions.KindSecrets {
		t.Fatalf("set = %+v, %v", rec, err)
	}
}
