package slack

import (
	"slices"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestAllRunsButton: a question that also waits in other runs says so and
// has "All N runs" buttons; bob's click answers it here and in the other
// run this surface shows (its message shows the answer), not in the run it
// does not show, and he is told which runs still wait.
func TestAllRunsButton(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	a, b, c := surfacetest.SingleChoice("group-a"), surfacetest.SingleChoice("group-b"), surfacetest.SingleChoice("group-c")
	ga := surfacetest.NewGroupAnswers(map[string][]questions.GroupRun{
		a.ID: {{SetID: b.ID, RunID: b.RunID, Spec: "nightly-b"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
		b.ID: {{SetID: a.ID, RunID: a.RunID, Spec: "nightly-a"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
	}, a, b, c)
	errs := make(chan error, 2)
	for _, set := range []questions.Set{a, b} {
		go func() { errs <- s.Ask(ctx, set, ga) }()
	}
	ma := setMessage(ctx, t, srv, a)
	mb := setMessage(ctx, t, srv, b)
	shown := texts(ma.Blocks)
	all := "All 3 runs: SQLite"
	if !strings.Contains(shown, all) || !strings.Contains(shown, "also waits in 2 other runs: nightly-b") {
		t.Fatalf("message = %s, want the other runs named and a %q button", shown, all)
	}
	q := a.Questions[0]
	act(ctx, t, srv, bob, ma, q, questions.Answer{Labels: []string{all}})
	for _, set := range []questions.Set{a, b} {
		resp, err := ga.WaitFinal(ctx, set.ID)
		if err != nil || len(resp.Answers) != 1 || resp.Answers[0].Labels[0] != "SQLite" || !strings.Contains(resp.By, "bob") {
			t.Errorf("set %s: %+v, %v; want bob's SQLite", set.ID, resp, err)
		}
	}
	if others := ga.Others(); !slices.Equal(others, []string{b.ID}) {
		t.Errorf("offered to the group %q, want only %s (c is not shown here)", others, b.ID)
	}
	if _, ok := ga.Final(c.ID); ok {
		t.Errorf("set %s, not shown here, was answered", c.ID)
	}
	if _, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.TS == mb.TS && strings.Contains(texts(m.Blocks), "Answered by *bob*") && !strings.Contains(texts(m.Blocks), all)
	}); err != nil {
		t.Errorf("the other run's message never showed bob's answer: %v", err)
	}
	waitEphemeral(ctx, t, srv, bob, func(e slacktest.Ephemeral) bool { return strings.Contains(e.Text, "nightly-c") })
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Ask: %v", err)
		}
	}
}

// TestAllRunsWhilePosting: b's message is in Slack but its
// chat.postMessage not answered yet when bob's "All 2 runs" click on a's
// message answers b too, and a's message shows it: b's message ends
// showing the answer, updated once.
func TestAllRunsWhilePosting(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	a, b := surfacetest.SingleChoice("posting-a"), surfacetest.SingleChoice("posting-b")
	ga := surfacetest.NewGroupAnswers(map[string][]questions.GroupRun{
		a.ID: {{SetID: b.ID, RunID: b.RunID, Spec: "nightly-b"}},
		b.ID: {{SetID: a.ID, RunID: a.RunID, Spec: "nightly-a"}},
	}, a, b)
	errs := make(chan error, 2)
	go func() { errs <- s.Ask(ctx, a, ga) }()
	ma := setMessage(ctx, t, srv, a)
	release := srv.HoldResponse("chat.postMessage")
	defer release()
	go func() { errs <- s.Ask(ctx, b, ga) }()
	mb := setMessage(ctx, t, srv, b) // posted, its post not answered

	all := "All 2 runs: SQLite"
	act(ctx, t, srv, bob, ma, a.Questions[0], questions.Answer{Labels: []string{all}})
	answered := func(ts string) func(m slacktest.Message) bool {
		return func(m slacktest.Message) bool {
			return m.TS == ts && strings.Contains(texts(m.Blocks), "Answered by *bob*") && !strings.Contains(texts(m.Blocks), all)
		}
	}
	// a's message is updated after b's answer was recorded and its
	// update found no message to update.
	if _, err := srv.WaitMessage(ctx, answered(ma.TS)); err != nil {
		t.Fatalf("a's message never showed bob's answer: %v", err)
	}
	if resp, err := ga.WaitFinal(ctx, b.ID); err != nil || !strings.Contains(resp.By, "bob") {
		t.Fatalf("set %s: %+v, %v; want bob's answer", b.ID, resp, err)
	}
	release()
	if _, err := srv.WaitMessage(ctx, answered(mb.TS)); err != nil {
		t.Errorf("b's message never showed bob's answer: %v", err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Ask: %v", err)
		}
	}
	if m, _ := srv.Message(mb.TS); m.Updates != 1 {
		t.Errorf("b's message was updated %d times, want once", m.Updates)
	}
}
