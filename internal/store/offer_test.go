package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestOfferDecidesOnceUnderContention: many surfaces offer different
// answers to the same questions at once; the store takes exactly one per
// question, each offer learns what became of it without reading the set
// again, and the set closes with the winners' answers.
func TestOfferDecidesOnceUnderContention(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	set := newWaitingRun(t, s, "r1", "q1", "q2")
	const n = 8
	var wg sync.WaitGroup
	type result struct {
		by    string
		taken bool
		final *questions.Response
		err   error
	}
	results := make(chan result, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, label := "q1", "A"
			if i%2 == 1 {
				q, label = "q2", "B"
			}
			by := fmt.Sprintf("p%d", i)
			d, err := s.Offer(ctx, questions.Response{SetID: set.ID, By: by, Surface: "test",
				Answers: []questions.Answer{{QuestionID: q, Labels: []string{label}}}})
			results <- result{by: by, taken: d.Taken, final: d.Final, err: err}
		}()
	}
	wg.Wait()
	close(results)
	taken, finals := 0, 0
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.taken {
			taken++
		}
		if r.final != nil {
			finals++
		}
	}
	if taken != 2 {
		t.Errorf("%d offers taken; want one per question", taken)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil || rec.State != SetAnswered || len(rec.Response.Answers) != 2 {
		t.Fatalf("set = %s %+v, %v; want answered with two answers", rec.State, rec.Response, err)
	}
	if finals == 0 {
		t.Error("no offer learned the set's final answer")
	}
}

// TestOfferDecisions: what Offer decides about answers to a missing set,
// another run's set, an invalid or anonymous answer, a partial answer and a
// late one, and that its answer reads as the stored set.
func TestOfferDecisions(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	set := newWaitingRun(t, s, "r1", "q1", "q2")
	newWaitingRun(t, s, "r2", "q1")
	offer := func(runID string, resp questions.Response) offerView {
		t.Helper()
		d, err := s.OfferFor(ctx, runID, resp)
		if err != nil {
			t.Fatal(err)
		}
		return offerView{d.Taken, d.Closed, d.Invalid, len(d.Pending), d.Final}
	}
	ans := func(setID, by string, qid, label string) questions.Response {
		return questions.Response{SetID: setID, By: by, Surface: "test", Answers: []questions.Answer{{QuestionID: qid, Labels: []string{label}}}}
	}
	if d := offer("", ans("nope", "x", "q1", "A")); d.taken || !errors.Is(d.invalid, ErrNotFound) {
		t.Errorf("answer to no set: %+v", d)
	}
	if d := offer("r2", ans(set.ID, "x", "q1", "A")); d.taken || d.invalid == nil {
		t.Errorf("answer to another run's set: %+v", d)
	}
	if d := offer("", ans(set.ID, "x", "q1", "Z")); d.taken || d.invalid == nil || d.pending != 2 {
		t.Errorf("invalid answer: %+v", d)
	}
	if d := offer("", ans(set.ID, "", "q1", "A")); d.taken || d.invalid == nil {
		t.Errorf("answer by nobody: %+v", d)
	}
	if d := offer("r1", ans(set.ID, "alice", "q1", "A")); !d.taken || d.closed || d.pending != 1 {
		t.Errorf("partial answer: %+v", d)
	}
	d := offer("", ans(set.ID, "bob", "q2", "B"))
	if !d.taken || !d.closed || d.final == nil {
		t.Fatalf("completing answer: %+v", d)
	}
	rec, err := s.QuestionSet(ctx, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Response.By != d.final.By || rec.Response.Surface != d.final.Surface || !rec.Response.At.Equal(d.final.At) || len(rec.Response.Answers) != len(d.final.Answers) {
		t.Errorf("decided final %+v; the store reads %+v", *d.final, rec.Response)
	}
	if d := offer("", ans(set.ID, "carol", "q2", "A")); d.taken || !d.closed || d.final == nil || d.final.By != "alice, bob" {
		t.Errorf("late answer: %+v", d)
	}
}

// offerView is what a test looks at of a surfaces.Decision.
type offerView struct {
	taken, closed bool
	invalid       error
	pending       int
	final         *questions.Response
}

// TestOpenSetsInOneStatement: the run loop's read of a run's open sets is
// one statement, and reads as QuestionSets does.
func TestOpenSetsInOneStatement(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := context.Background()
	set := newWaitingRun(t, s, "r1", "q1", "q2")
	if _, err := s.Offer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "test",
		Answers: []questions.Answer{{QuestionID: "q1", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	n := s.Statements()
	got, err := s.OpenSets(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Statements() - n; d != 1 {
		t.Errorf("OpenSets: %d statements, want 1", d)
	}
	want, err := s.QuestionSets(ctx, SetFilter{RunID: "r1", State: []SetState{SetAnswered, SetPending}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OpenSets:\n got %+v\nwant %+v", got, want)
	}
	if len(got) != 1 || len(got[0].Response.Answers) != 1 || got[0].Response.By != "alice" {
		t.Errorf("open sets = %+v", got)
	}
}
