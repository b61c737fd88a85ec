package surfacetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// closeReason is the reason the suite closes sets with (Closer).
const closeReason = "cancelled by the conformance suite"

// opCtx is the context of one call of an optional capability: the runner
// calls them on a context of their own (context.WithoutCancel of the run's,
// bounded), not on an Ask's.
func opCtx(b Backend) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.Timeout)
}

// waitReturned waits for an Ask whose context ended or whose set was
// closed, and checks how it returned.
func waitReturned(t *testing.T, b Backend, ch <-chan error, what string) {
	t.Helper()
	if err := wait(t, b, ch, what); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: Ask = %v, want nil or the context's error", what, err)
	}
}

// testResolver: a set answered on another surface is shown so once the
// runner calls Resolve, after it ended the Asks; Resolve is idempotent.
func testResolver(t *testing.T, b Backend) {
	s := b.New(t)
	res, ok := s.(surfaces.Resolver)
	if !ok {
		t.Skip("surface is no surfaces.Resolver")
	}
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	if !waitPosted(t, b, set) {
		return
	}
	final := questions.Response{SetID: set.ID, By: elsewhere, Surface: "elsewhere", At: time.Now(),
		Answers: []questions.Answer{Choose(set.Questions[0], "SQLite")}}
	answers.Close(set.ID, &final) // the runner ends the Asks
	waitReturned(t, b, ch, "Ask of a set answered elsewhere")
	for i := range 2 {
		ctx, cancel := opCtx(b)
		if err := res.Resolve(ctx, set, final); err != nil {
			t.Errorf("Resolve %d = %v", i+1, err)
		}
		cancel()
	}
	waitShown(t, b, set, elsewhere, "set resolved elsewhere")
}

// testReminder: a reminder of a set still waiting is shown, posts nothing
// that is taken for the question again, and the set is answered as usual.
func testReminder(t *testing.T, b Backend) {
	s := b.New(t)
	rem, ok := s.(surfaces.Reminder)
	if !ok {
		t.Skip("surface is no surfaces.Reminder")
	}
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	if !waitPosted(t, b, set) {
		return
	}
	var before string
	if b.Shown != nil {
		before = b.Shown(t, set)
	}
	ctx, ocancel := opCtx(b)
	err := rem.Remind(ctx, set)
	ocancel()
	if err != nil {
		t.Errorf("Remind = %v", err)
	}
	if b.Shown != nil {
		deadline := time.Now().Add(b.Timeout)
		for b.Shown(t, set) == before {
			if time.Now().After(deadline) {
				t.Errorf("the reminder is not shown within %v", b.Timeout)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	want := []questions.Answer{Choose(set.Questions[0], "MySQL")}
	b.Answer(t, set, want)
	if _, ok := waitFinal(t, b, answers, set); ok {
		waitShown(t, b, set, b.Person, "answer after a reminder")
	}
	stop(t, b, cancel, ch, "answered set "+set.ID)
	checkPosted(t, b, set)
}

// testCloser: a set closed without an answer (cancelled, timed out) shows
// why once the runner calls CloseSet, after it ended the Asks; CloseSet is
// idempotent, and an answer given afterwards is not taken.
func testCloser(t *testing.T, b Backend) {
	s := b.New(t)
	cl, ok := s.(surfaces.Closer)
	if !ok {
		t.Skip("surface is no surfaces.Closer")
	}
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	if !waitPosted(t, b, set) {
		return
	}
	answers.Close(set.ID, nil)
	cancel() // the runner ends the Asks of a set that expired
	waitReturned(t, b, ch, "Ask of a closed set")
	for i := range 2 {
		ctx, ocancel := opCtx(b)
		if err := cl.CloseSet(ctx, set, closeReason); err != nil {
			t.Errorf("CloseSet %d = %v", i+1, err)
		}
		ocancel()
	}
	waitShown(t, b, set, closeReason, "closed set")
	checkPosted(t, b, set)
	for i, o := range answers.Offers(set.ID) {
		if o.Decision.Taken {
			t.Errorf("offer %d of a closed set was taken: %+v", i, o)
		}
	}
}

// testRunCapabilities: a run's progress, the notice that the session
// resumed, and the run's end are reported without error, more than once
// (each is idempotent), after the run's set was answered.
func testRunCapabilities(t *testing.T, b Backend) {
	s := b.New(t)
	pr, isPR := s.(surfaces.ProgressReporter)
	rn, isRN := s.(surfaces.ResumeNotifier)
	re, isRE := s.(surfaces.RunEnder)
	if !isPR && !isRN && !isRE {
		t.Skip("surface is no surfaces.ProgressReporter, ResumeNotifier nor RunEnder")
	}
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	p := surfaces.RunProgress{RunID: set.RunID, Title: set.Title, Step: "turn 1 running", Turn: 1, ToolUses: 2, LastTool: "Bash: go test ./...", CostUSD: 0.01, Elapsed: time.Second}
	call := func(what string, fn func(context.Context) error) {
		t.Helper()
		for i := range 2 {
			ctx, cancel := opCtx(b)
			if err := fn(ctx); err != nil {
				t.Errorf("%s %d = %v", what, i+1, err)
			}
			cancel()
		}
	}
	if isPR {
		call("Progress", func(ctx context.Context) error { return pr.Progress(ctx, p) })
	}
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	answer(t, b, set, []questions.Answer{Choose(set.Questions[0], "Postgres")})
	_, answered := waitFinal(t, b, answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	if !answered {
		return
	}
	waitShown(t, b, set, b.Person, "taken answer")
	if isRN {
		call("Resumed", func(ctx context.Context) error { return rn.Resumed(ctx, set) })
	}
	end := p
	end.Step, end.Final, end.Summary, end.Turn = "done", true, "Finished by the conformance suite.", 2
	if isPR {
		call("Progress (final)", func(ctx context.Context) error { return pr.Progress(ctx, end) })
	}
	if isRE {
		call("RunEnded", func(ctx context.Context) error { return re.RunEnded(ctx, end) })
	}
}

// testTransient: the service fails the surface's first write about the set
// for a moment (a 5xx, a rate limit, or a response lost after the write
// was done). Asked again as the runner does after a failed Ask, the set is
// posted exactly once, and its answer taken and shown.
func testTransient(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	b.Transient(t, set)
	s := b.New(t)
	var ch <-chan error
	var cancel context.CancelFunc
	for attempt := 1; ; attempt++ {
		ch, cancel = askAsRunner(b, s, set, answers)
		posted := false
		deadline := time.Now().Add(b.Timeout)
		for !posted {
			select {
			case err := <-ch:
				cancel()
				if attempt >= 5 {
					t.Fatalf("Ask %d = %v; want the set posted after a transient failure", attempt, err)
				}
				if err == nil || errors.Is(err, surfaces.ErrUnavailable) {
					t.Fatalf("Ask %d = %v before the set was posted; want an error to retry after", attempt, err)
				}
				t.Logf("Ask %d failed as the service did: %v (asked again)", attempt, err)
			case <-time.After(10 * time.Millisecond):
				posted = b.Posted(t, set) > 0
				if !posted && time.Now().After(deadline) {
					cancel()
					t.Fatalf("set %s not posted within %v", set.ID, b.Timeout)
				}
				continue
			}
			break
		}
		if posted {
			break
		}
	}
	defer cancel()
	want := []questions.Answer{Choose(set.Questions[0], "SQLite")}
	b.Answer(t, set, want)
	if _, ok := waitFinal(t, b, answers, set); ok {
		waitShown(t, b, set, b.Person, "answer after a transient failure")
	}
	stop(t, b, cancel, ch, "answered set "+set.ID)
	checkPosted(t, b, set)
	if b.Shown != nil && strings.TrimSpace(b.Shown(t, set)) == "" {
		t.Errorf("nothing shown about set %s", set.ID)
	}
}
