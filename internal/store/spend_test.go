package store

import (
	"context"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestSpendByFinishTime: the spend of a period is the sum of the turns'
// costs by when they finished, of every run or of one spec's; a cap
// question answered Continue raises its cap once, and its set is consumed.
func TestSpendByFinishTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	turn := func(runID, spec string, at time.Time, cost float64) {
		t.Helper()
		s.now = func() time.Time { return at }
		defer func() { s.now = time.Now }()
		if _, err := s.Run(ctx, runID); err != nil {
			if _, err := s.CreateRun(ctx, Run{ID: runID, Spec: spec, Prompt: "p", Status: RunRunning}); err != nil {
				t.Fatal(err)
			}
		}
		tn, err := s.BeginTurn(ctx, Turn{RunID: runID, Kind: TurnStart, Prompt: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, runID, tn.Seq, TurnResult{Status: executor.StatusSuccess, CostUSD: cost}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	turn("a1", "nightly", day.Add(-time.Minute), 7) // yesterday
	turn("a2", "nightly", day.Add(time.Hour), 1.5)
	turn("a2", "nightly", day.Add(2*time.Hour), 0.25)
	turn("b1", "other", day.Add(3*time.Hour), 2)
	turn("b2", "", day.Add(25*time.Hour), 4) // tomorrow
	for _, c := range []struct {
		spec string
		want float64
	}{{CapScopeAll, 3.75}, {"nightly", 1.75}, {"other", 2}, {"none", 0}} {
		got, err := s.Spend(ctx, c.spec, day, day.AddDate(0, 0, 1))
		if err != nil || got != c.want {
			t.Errorf("Spend(%q) = %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
	by, err := s.SpecSpend(ctx, day, day.AddDate(0, 0, 1))
	if err != nil || len(by) != 2 || by["nightly"] != 1.75 || by["other"] != 2 {
		t.Errorf("SpecSpend = %v, %v", by, err)
	}

	set := questions.NewSet("a2", 0, []questions.Question{{Header: "Spend cap", Text: "Continue?",
		Options: []questions.Option{{Label: "Continue"}, {Label: "Stop"}}}})
	set.Kind = questions.KindCap
	if _, err := s.AskRun(ctx, set, nil); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.CapSets(ctx, "nightly", day); err != nil || len(recs) != 1 || recs[0].State != SetPending {
		t.Fatalf("CapSets = %+v, %v", recs, err)
	}
	if recs, err := s.CapSets(ctx, "other", day); err != nil || len(recs) != 0 {
		t.Fatalf("CapSets(other) = %+v, %v", recs, err)
	}
	answer(t, s, set, "Continue")
	for i, want := range []bool{true, false} {
		raised, err := s.RaiseCap(ctx, "a2", set.ID, "nightly", "day", day, 5)
		if err != nil || raised != want {
			t.Fatalf("RaiseCap #%d = %v, %v; want %v", i+1, raised, err, want)
		}
	}
	if total, n, err := s.CapRaises(ctx, "nightly", "day", day); err != nil || total != 5 || n != 1 {
		t.Errorf("CapRaises = %v, %d, %v; want 5, 1", total, n, err)
	}
	if total, n, err := s.CapRaises(ctx, "nightly", "day", day.AddDate(0, 0, 1)); err != nil || total != 0 || n != 0 {
		t.Errorf("CapRaises of tomorrow = %v, %d, %v", total, n, err)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil || rec.State != SetResumed {
		t.Fatalf("the raised cap's set is %s, %v; want resumed", rec.State, err)
	}
}

// TestCapQuestionHoldsAnsweredRun: a waiting run whose model question is
// answered is claimable, unless its spend cap question waits too: no
// instance takes it up (and parks it again) before the cap is answered.
func TestCapQuestionHoldsAnsweredRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	set := newWaitingRun(t, s, "r1", "q1")
	answer(t, s, set, "A")
	claimable := func() bool {
		t.Helper()
		runs, err := s.ClaimableRuns(ctx, "host", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(runs) == 1 && runs[0].ID == "r1"
	}
	if !claimable() {
		t.Fatal("the answered run is not claimable")
	}
	capSet := questions.NewSet("r1\x00cap", 0, []questions.Question{{Header: "Spend cap", Text: "Continue?",
		Options: []questions.Option{{Label: "Continue"}, {Label: "Stop"}}}})
	capSet.RunID, capSet.Kind = "r1", questions.KindCap
	if _, err := s.AskRun(ctx, capSet, nil); err != nil {
		t.Fatal(err)
	}
	if claimable() {
		t.Fatal("a run whose cap question waits is claimable")
	}
	answer(t, s, capSet, "Continue")
	if !claimable() {
		t.Fatal("the run is not claimable once its cap question is answered")
	}
}
