package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// newGroupRun makes a run of spec waiting on one question with text.
func newGroupRun(t *testing.T, s *Store, runID, spec, text string) questions.Set {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, Run{ID: runID, Spec: spec, Prompt: "do it", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: runID, Kind: TurnStart, Prompt: "do it", SessionID: "sess-" + runID})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.NewSet(runID, turn.Seq, []questions.Question{{Text: text, Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}})
	if err := s.FinishTurn(ctx, runID, turn.Seq, TurnResult{Status: "success", SessionID: "sess-" + runID}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	return set
}

// TestAnswerGroup: the sets asking the same question in other runs form a
// group; AnswerGroup answers those given in one transaction, skips (and
// reports) one answered meanwhile and one of another question, and each
// run's decision log names the shared decision and the runs it covered.
func TestAnswerGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	s1 := newGroupRun(t, s, "r1", "nightly-a", "Upgrade to pgx v5?")
	s2 := newGroupRun(t, s, "r2", "nightly-b", "upgrade to  PGX v5?")
	s3 := newGroupRun(t, s, "r3", "nightly-c", "Upgrade to pgx v5?")
	s4 := newGroupRun(t, s, "r4", "nightly-d", "Upgrade to pgx v6?")

	g, err := s.Group(ctx, s1.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 2 || g[0].SetID != s2.ID || g[0].Spec != "nightly-b" || g[1].SetID != s3.ID {
		t.Fatalf("group of %s = %+v, want the sets of r2 and r3", s1.ID, g)
	}
	if g, err := s.Group(ctx, s4.ID, 0); err != nil || len(g) != 0 {
		t.Fatalf("group of another question = %+v, %v", g, err)
	}
	if _, err := s.Group(ctx, "nope", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("group of no set: %v", err)
	}
	// r3's question is answered on its own first.
	if d, err := s.Offer(ctx, questions.Response{SetID: s3.ID, By: "bob", Surface: "github",
		Answers: []questions.Answer{{QuestionID: s3.Questions[0].ID, Labels: []string{"No"}}}}); err != nil || !d.Taken {
		t.Fatalf("offer to r3: %+v, %v", d, err)
	}
	resp := questions.Response{SetID: s1.ID, By: "alice", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: s1.Questions[0].ID, Labels: []string{"Yes"}}}}
	res, err := s.AnswerGroup(ctx, resp, []string{s2.ID, s3.ID, s4.ID, s2.ID})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID == "" || res.Taken() != 2 || len(res.Sets) != 4 {
		t.Fatalf("AnswerGroup = %+v, want 2 taken of 4", res)
	}
	want := []struct {
		set, run, spec string
		taken, closed  bool
		invalid        string
	}{
		{s1.ID, "r1", "nightly-a", true, true, ""},
		{s2.ID, "r2", "nightly-b", true, true, ""},
		{s3.ID, "r3", "nightly-c", false, true, ""},
		{s4.ID, "r4", "nightly-d", false, false, "does not ask the same"},
	}
	for i, w := range want {
		o := res.Sets[i]
		d := o.Decision
		if o.SetID != w.set || o.RunID != w.run || o.Spec != w.spec || d.Taken != w.taken || d.Closed != w.closed ||
			(w.invalid == "") != (d.Invalid == nil) || (d.Invalid != nil && !strings.Contains(d.Invalid.Error(), w.invalid)) {
			t.Errorf("outcome %d = %+v (invalid %v), want %+v", i, o, d.Invalid, w)
		}
	}
	if f := res.Sets[2].Decision.Final; f == nil || f.By != "bob" {
		t.Errorf("r3's outcome does not say bob answered it: %+v", res.Sets[2].Decision)
	}
	for _, set := range []questions.Set{s1, s2} {
		rec, err := s.QuestionSet(ctx, set.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != SetAnswered || rec.Response.By != "alice" || len(rec.Response.Answers) != 1 ||
			rec.Response.Answers[0].QuestionID != set.Questions[0].ID || rec.Response.Answers[0].Labels[0] != "Yes" {
			t.Errorf("set %s = %s %+v, want answered Yes by alice", set.ID, rec.State, rec.Response)
		}
	}
	// Each run's log names the shared decision and the other run.
	for run, other := range map[string]string{"r1": "r2", "r2": "r1"} {
		log, err := s.DecisionLog(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != 1 || len(log[0].Shared) != 1 {
			t.Fatalf("decision log of %s = %+v, want one shared decision", run, log)
		}
		sh := log[0].Shared[0]
		if sh.ID != res.ID || sh.By != "alice" || sh.Surface != "cli" || len(sh.Others) != 1 || sh.Others[0].RunID != other {
			t.Errorf("shared decision of %s = %+v, want %s by alice covering %s", run, sh, res.ID, other)
		}
	}
	if log, err := s.DecisionLog(ctx, "r3"); err != nil || len(log) != 1 || len(log[0].Shared) != 0 {
		t.Errorf("decision log of r3 = %+v, %v; want no shared decision", log, err)
	}
	// Once answered, nothing is left of the group.
	if g, err := s.Group(ctx, s1.ID, 0); err != nil || len(g) != 0 {
		t.Errorf("group after the answer = %+v, %v", g, err)
	}
	// Again: every set is closed, nothing is taken.
	res, err = s.AnswerGroup(ctx, resp, []string{s2.ID})
	if err != nil || res.ID != "" || res.Taken() != 0 || !res.Sets[0].Decision.Closed || !res.Sets[1].Decision.Closed {
		t.Errorf("second AnswerGroup = %+v, %v", res, err)
	}
	// The runs' purge takes their shared decisions with them.
	if _, err := s.AnswerGroup(ctx, questions.Response{SetID: "nope", By: "a", Surface: "cli"}, nil); err != nil {
		t.Errorf("AnswerGroup of no set: %v", err)
	}
}

// TestAnswerGroupOnceUnderContention: two people answer the group at once,
// each from its own set: every set takes exactly one answer.
func TestAnswerGroupOnceUnderContention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	var sets []questions.Set
	for _, r := range []string{"r1", "r2", "r3"} {
		sets = append(sets, newGroupRun(t, a, r, "spec-"+r, "Deploy now?"))
	}
	type result struct {
		g   GroupAnswer
		err error
	}
	done := make(chan result, 2)
	go func() {
		g, err := a.AnswerGroup(ctx, questions.Response{SetID: sets[0].ID, By: "alice", Surface: "cli",
			Answers: []questions.Answer{{QuestionID: sets[0].Questions[0].ID, Labels: []string{"Yes"}}}}, []string{sets[1].ID, sets[2].ID})
		done <- result{g, err}
	}()
	go func() {
		g, err := b.AnswerGroup(ctx, questions.Response{SetID: sets[2].ID, By: "bob", Surface: "web",
			Answers: []questions.Answer{{QuestionID: sets[2].Questions[0].ID, Labels: []string{"No"}}}}, []string{sets[0].ID, sets[1].ID})
		done <- result{g, err}
	}()
	taken := 0
	for i := 0; i < 2; i++ {
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		taken += r.g.Taken()
	}
	if taken != 3 {
		t.Fatalf("%d sets took an answer, want 3 (each exactly once)", taken)
	}
	by := ""
	for _, set := range sets {
		rec, err := a.QuestionSet(ctx, set.ID)
		if err != nil || rec.State != SetAnswered {
			t.Fatalf("set %s: %s, %v", set.ID, rec.State, err)
		}
		if by == "" {
			by = rec.Response.By
		}
		if rec.Response.By != by {
			t.Errorf("set %s answered by %s, another by %s: one transaction answers the whole group", set.ID, rec.Response.By, by)
		}
	}
}

// TestGroupQueryUsesTheIndex: among 10,000 waiting runs, the runs a
// question also waits in are found by the fingerprint index, not a scan;
// max bounds what is read.
func TestGroupQueryUsesTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	seedWaitingRuns(t, s, "w-", 10000)
	var sets []questions.Set
	for _, r := range []string{"g1", "g2", "g3"} {
		sets = append(sets, newGroupRun(t, s, r, "spec-"+r, "Upgrade to pgx v5?"))
	}
	plan := explain(t, s, groupQuery+" LIMIT 11", questions.Fingerprint(sets[0]), SetPending, "g1")
	t.Logf("Group:\n\t%s", strings.Join(plan, "\n\t"))
	used := false
	for _, step := range plan {
		used = used || strings.Contains(step, "question_sets_fingerprint")
		if s.Shared() && strings.Contains(step, "Seq Scan on question_sets") || !s.Shared() && strings.HasPrefix(step, "SCAN ") {
			t.Errorf("Group reads a whole table: %s", step)
		}
	}
	if !used {
		t.Errorf("Group does not use question_sets_fingerprint")
	}
	g, err := s.Group(ctx, sets[0].ID, 1)
	if err != nil || len(g) != 1 || g[0].SetID != sets[1].ID {
		t.Errorf("Group with max 1 = %+v, %v; want g2's set", g, err)
	}
}
