package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// newAsked stores a run whose first turn asked a set of two questions.
func newAsked(t *testing.T, st *store.Store, runID string) questions.Set {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateRun(ctx, store.Run{ID: runID, Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: runID, Kind: store.TurnStart, Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.NewSet(runID, turn.Seq, []questions.Question{
		{Text: "Which database?", Options: []questions.Option{{Label: "SQLite"}, {Label: "Postgres"}}},
		{Text: "Which name?"},
	})
	if err := st.FinishTurn(ctx, runID, turn.Seq, store.TurnResult{Status: "success"}, &set, nil); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestStoreAnswersDecide: the store's Answers takes the first valid answer
// to each question, keeps a partial answer pending, refuses invalid ones
// and answers to another run's set, and tells a late answer who answered.
func TestStoreAnswersDecide(t *testing.T) {
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
	set := newAsked(t, st, "r1")
	other := newAsked(t, st, "r2")
	a := r.answers("r1")
	q1, q2 := set.Questions[0], set.Questions[1]
	offer := func(resp questions.Response) (d struct {
		taken, closed bool
		invalid       string
		pending       int
		finalBy       string
	}) {
		t.Helper()
		got, err := a.Offer(ctx, resp)
		if err != nil {
			t.Fatalf("Offer(%+v) = %v", resp, err)
		}
		d.taken, d.closed, d.pending = got.Taken, got.Closed, len(got.Pending)
		if got.Invalid != nil {
			d.invalid = got.Invalid.Error()
		}
		if got.Final != nil {
			d.finalBy = got.Final.By
		}
		return d
	}
	resp := func(setID, by string, ans ...questions.Answer) questions.Response {
		return questions.Response{SetID: setID, By: by, Surface: "test", Answers: ans}
	}
	if d := offer(resp(set.ID, "x", questions.Answer{QuestionID: q1.ID, Labels: []string{"Oracle"}})); d.taken || !strings.Contains(d.invalid, "not an option") {
		t.Errorf("invalid answer: %+v", d)
	}
	if d := offer(resp(other.ID, "x", questions.Answer{QuestionID: other.Questions[0].ID, Labels: []string{"SQLite"}})); d.taken || !strings.Contains(d.invalid, "not one of run r1") {
		t.Errorf("answer to another run's set: %+v", d)
	}
	if d := offer(resp(set.ID, "", questions.Answer{QuestionID: q1.ID, Labels: []string{"SQLite"}})); d.taken || !strings.Contains(d.invalid, "who") {
		t.Errorf("answer by nobody: %+v", d)
	}
	if d := offer(resp(set.ID, "alice", questions.Answer{QuestionID: q1.ID, Labels: []string{"SQLite"}})); !d.taken || d.closed || d.pending != 1 {
		t.Errorf("partial answer: %+v", d)
	}
	if d := offer(resp(set.ID, "bob", questions.Answer{QuestionID: q1.ID, Labels: []string{"Postgres"}})); d.taken || !strings.Contains(d.invalid, "already answered by alice") {
		t.Errorf("second answer to an answered question: %+v", d)
	}
	if d := offer(resp(set.ID, "bob", questions.Answer{QuestionID: q2.ID, Text: "orc"})); !d.taken || !d.closed || d.finalBy != "alice, bob" {
		t.Errorf("completing answer: %+v", d)
	}
	if d := offer(resp(set.ID, "carol", questions.Answer{QuestionID: q2.ID, Text: "late"})); d.taken || !d.closed || d.finalBy != "alice, bob" {
		t.Errorf("late answer: %+v", d)
	}
	if err := st.CancelRun(ctx, "r2", "test"); err != nil {
		t.Fatal(err)
	}
	b := r.answers("r2")
	if got, err := b.Offer(ctx, resp(other.ID, "x", questions.Answer{QuestionID: other.Questions[0].ID, Labels: []string{"SQLite"}})); err != nil || got.Taken || !got.Closed || got.Final != nil {
		t.Errorf("answer to a cancelled run's set = %+v, %v; want closed without a final answer", got, err)
	}
}
