// Package surfacetest is the conformance suite every surfaces.Surface runs,
// the question sets they all test with, and Answers, an in-memory
// surfaces.Answers deciding as the store does.
//
// A surface's test builds a Backend (a fake of the service behind the
// surface, and the ways people act on it) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		srv := newFakeServer(t)
//		surfacetest.Run(t, surfacetest.Backend{
//			New:    func(t *testing.T) surfaces.Surface { return newSurface(t, srv) },
//			Answer: srv.answer,
//			Shown:  srv.shown,
//			Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true},
//		})
//	}
//
// The subtests run one after another on the same Backend; each uses its own
// sets (distinct IDs), so a backend's state may be shared by all of them.
//
// The suite ends an Ask's context as the runner does: as soon as the set has
// its complete answer, inside the Offer that completed it (Answers.OnFinal),
// and only then checks what people are shown. It calls the optional
// capabilities a surface has (Resolver, Reminder, Closer, ProgressReporter,
// ResumeNotifier, RunEnder) as the runner does, each twice (they are
// idempotent), and with Backend.Transient has the service fail a write for a
// moment.
package surfacetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Features says which behaviours a surface supports; the subtests that need
// a missing one are skipped.
type Features struct {
	// MultiSelect: several options can be chosen for one question.
	MultiSelect bool
	// FreeText: a question can be answered in one's own words, with or
	// without options.
	FreeText bool
	// MultiQuestion: a set of several questions is answered as a whole.
	MultiQuestion bool
	// AnswerWhileDown: an answer given while no Ask is running (the process
	// was down) is returned by the next Ask.
	AnswerWhileDown bool
}

// Backend is what Run needs to drive one surface.
//
// Answer, Intrude, Posted and Shown may be called from goroutines other than
// the test's, and concurrently for different sets: report problems with
// t.Errorf (t.Fatal only stops the test from the test's own goroutine).
type Backend struct {
	// New returns a new surface on the same backend state, as a process
	// restart would make. Run calls it once per subtest, and again where it
	// checks idempotence.
	New func(t *testing.T) surfaces.Surface

	// Answer makes a person allowed to answer give answers (one per question
	// of set, in order) the way the surface lets people: typing a reply,
	// clicking a button... When Posted is set, Run calls Answer only after
	// set has been posted. Run may call Answer again for the same set (after
	// a refusal, or once the set was answered elsewhere).
	Answer func(t *testing.T, set questions.Set, answers []questions.Answer)

	// Intrude makes someone NOT allowed to answer try to answer. Nil if the
	// surface has no strangers (the terminal).
	Intrude func(t *testing.T, set questions.Set, answers []questions.Answer)

	// Posted reports how many times set was posted (comments, messages).
	// Nil if not applicable.
	Posted func(t *testing.T, set questions.Set) int

	// Shown returns all the text the surface showed people about set so far
	// (its posts as they now are, its replies, lines printed), so that Run
	// can check what people are told. Nil skips those checks.
	Shown func(t *testing.T, set questions.Set) string

	// Person is how the surface names the allowed person who answers
	// (Response.By, or the part of it people see); with Shown, Run checks
	// that a taken answer is shown as theirs. Empty skips that check.
	Person string

	// Transient makes the service fail the surface's next write about set
	// for a moment, as services do: a 5xx, a rate limit, or a response
	// lost after the write was done. Nil skips that subtest (it needs
	// Posted too).
	Transient func(t *testing.T, set questions.Set)

	Features Features

	// Timeout bounds each wait (default one minute: the suite runs under
	// -race on loaded machines).
	Timeout time.Duration
}

// Reasons and names the suite uses, plain words every surface shows as they
// are.
const (
	refusal   = "refused by the conformance suite"
	elsewhere = "carol-elsewhere"
)

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil || b.Answer == nil {
		t.Fatal("surfacetest: Backend.New and Backend.Answer are required")
	}
	if b.Timeout <= 0 {
		b.Timeout = time.Minute
	}
	f := b.Features
	tests := []struct {
		name string
		skip string
		run  func(*testing.T, Backend)
	}{
		{"SingleChoice", "", testSingleChoice},
		{"MultiSelect", skipUnless(f.MultiSelect, "MultiSelect"), testMultiSelect},
		{"FreeText", skipUnless(f.FreeText, "FreeText"), testFreeText},
		{"Other", skipUnless(f.FreeText, "FreeText"), testOther},
		{"TwoQuestions", skipUnless(f.MultiQuestion, "MultiQuestion"), testTwoQuestions},
		{"HostileText", "", testHostile},
		{"Stranger", skipUnless(b.Intrude != nil, "Intrude"), testStranger},
		{"Invalid", "", testInvalid},
		{"AnsweredElsewhere", "", testAnsweredElsewhere},
		{"Cancel", "", testCancel},
		{"Idempotent", "", testIdempotent},
		{"Restart", skipUnless(f.AnswerWhileDown, "AnswerWhileDown"), testRestart},
		{"Concurrent", "", testConcurrent},
		{"Resolver", "", testResolver},
		{"Reminder", "", testReminder},
		{"Closer", "", testCloser},
		{"RunCapabilities", "", testRunCapabilities},
		{"Transient", skipUnless(b.Transient != nil && b.Posted != nil, "Transient and Posted"), testTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip != "" {
				t.Skip(tt.skip)
			}
			tt.run(t, b)
		})
	}
}

func skipUnless(ok bool, feature string) string {
	if ok {
		return ""
	}
	return "surface does not support " + feature
}

// setName names a fixture set after the running (sub)test, so that sets of
// different subtests never share an ID.
func setName(t *testing.T, suffix string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if suffix != "" {
		name += "-" + suffix
	}
	return strings.ToLower(name)
}

// askAsRunner runs s.Ask for set in a goroutine, with a context ended as
// the runner ends it: as soon as answers has the set's complete answer
// (inside the Offer that completed it, before the surface could show it),
// or after b.Timeout. What the surface shows about the answer must not
// depend on that context (surfaces.Surface).
func askAsRunner(b Backend, s surfaces.Surface, set questions.Set, answers *Answers) (<-chan error, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	answers.OnFinal(set.ID, cancel)
	return startAsk(ctx, s, set, answers), cancel
}

// startAsk runs s.Ask(ctx, set, answers) in a goroutine; the channel
// delivers what it returned.
func startAsk(ctx context.Context, s surfaces.Surface, set questions.Set, answers surfaces.Answers) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Ask(ctx, set, answers) }()
	return ch
}

// wait waits for an Ask to return, failing the test after b.Timeout.
func wait(t *testing.T, b Backend, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(b.Timeout + 10*time.Second):
		t.Fatalf("%s: Ask did not return within %v", what, b.Timeout+10*time.Second)
		return nil
	}
}

// stop cancels an Ask whose set was answered and checks how it returned:
// nil (the set is closed) or the context's error.
func stop(t *testing.T, b Backend, cancel context.CancelFunc, ch <-chan error, what string) {
	t.Helper()
	cancel()
	if err := wait(t, b, ch, what); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: Ask = %v, want nil or the context's error", what, err)
	}
}

// waitPosted waits until set has been posted at least once, when the
// backend can tell.
func waitPosted(t *testing.T, b Backend, set questions.Set) bool {
	t.Helper()
	if b.Posted == nil {
		return true
	}
	deadline := time.Now().Add(b.Timeout)
	for b.Posted(t, set) < 1 {
		if time.Now().After(deadline) {
			t.Errorf("set %s was not posted within %v", set.ID, b.Timeout)
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// waitShown waits until the surface shows want (case-insensitive) about set,
// when the backend can tell.
func waitShown(t *testing.T, b Backend, set questions.Set, want, what string) {
	t.Helper()
	if b.Shown == nil || want == "" {
		return
	}
	deadline := time.Now().Add(b.Timeout)
	for {
		got := b.Shown(t, set)
		if strings.Contains(strings.ToLower(got), strings.ToLower(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: the surface does not show %q about set %s within %v; it shows:\n%s", what, want, set.ID, b.Timeout, got)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answer waits for set to be posted, then has an allowed person answer it.
func answer(t *testing.T, b Backend, set questions.Set, answers []questions.Answer) {
	t.Helper()
	if waitPosted(t, b, set) {
		b.Answer(t, set, answers)
	}
}

// newAnswers returns Answers where sets are pending.
func newAnswers(sets ...questions.Set) *Answers {
	a := NewAnswers()
	for _, set := range sets {
		a.Add(set)
	}
	return a
}

// waitFinal waits for set's complete answer in answers.
func waitFinal(t *testing.T, b Backend, answers *Answers, set questions.Set) (questions.Response, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	resp, err := answers.WaitFinal(ctx, set.ID)
	if err != nil {
		t.Errorf("set %s got no answer within %v; offers: %+v", set.ID, b.Timeout, answers.Offers(set.ID))
		return resp, false
	}
	return resp, true
}

// checkOffers checks that every offer for set came from the surface named
// surface and says who gave it.
func checkOffers(t *testing.T, surface string, answers *Answers, set questions.Set) {
	t.Helper()
	for i, o := range answers.Offers(set.ID) {
		if o.Response.Surface != surface {
			t.Errorf("offer %d: Response.Surface = %q, want the surface's Name() %q", i, o.Response.Surface, surface)
		}
		if strings.TrimSpace(o.Response.By) == "" {
			t.Errorf("offer %d: Response.By is empty, want who answered", i)
		}
	}
}

// askAndAnswer asks set on a new surface, answers it and checks what was
// offered, taken and shown.
func askAndAnswer(t *testing.T, b Backend, set questions.Set, want []questions.Answer) {
	t.Helper()
	s := b.New(t)
	answers := newAnswers(set)
	start := time.Now()
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	answer(t, b, set, want)
	resp, ok := waitFinal(t, b, answers, set)
	if !ok {
		stop(t, b, cancel, ch, "unanswered set "+set.ID)
		return
	}
	CheckResponse(t, s.Name(), set, resp, want, start)
	checkOffers(t, s.Name(), answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	waitShown(t, b, set, b.Person, "taken answer, after the Ask's context ended")
}

// ValidResponse reports whether resp is a complete, valid answer to set:
// one answer per question of set, in order, each as questions.CheckPartial
// wants it.
func ValidResponse(set questions.Set, resp questions.Response) error {
	if resp.SetID != set.ID {
		return fmt.Errorf("answer is to set %q, not %q", resp.SetID, set.ID)
	}
	if len(resp.Answers) != len(set.Questions) {
		return fmt.Errorf("answer to set %s has %d answers for %d questions", set.ID, len(resp.Answers), len(set.Questions))
	}
	return questions.CheckPartial(set, resp)
}

// CheckResponse checks that resp is a complete answer to set from the surface
// named surface, given at or after since, that says what want says.
func CheckResponse(t *testing.T, surface string, set questions.Set, resp questions.Response, want []questions.Answer, since time.Time) {
	t.Helper()
	if resp.SetID != set.ID {
		t.Errorf("Response.SetID = %q, want %q", resp.SetID, set.ID)
	}
	if resp.Surface != surface {
		t.Errorf("Response.Surface = %q, want the surface's Name() %q", resp.Surface, surface)
	}
	if strings.TrimSpace(resp.By) == "" {
		t.Errorf("Response.By is empty, want who answered")
	}
	if resp.At.IsZero() {
		t.Errorf("Response.At is zero, want when the answer was given")
	} else if resp.At.Before(since.Add(-time.Minute)) || resp.At.After(time.Now().Add(time.Minute)) {
		t.Errorf("Response.At = %v, want between %v and now", resp.At, since)
	}
	if len(resp.Answers) != len(set.Questions) {
		t.Fatalf("Response has %d answers, want one per question (%d): %+v", len(resp.Answers), len(set.Questions), resp.Answers)
	}
	for i, q := range set.Questions {
		got := resp.Answers[i]
		if got.QuestionID != q.ID {
			t.Errorf("answer %d is to question %q, want %q", i, got.QuestionID, q.ID)
		}
		if i < len(want) && !SameAnswer(got, want[i]) {
			t.Errorf("answer %d = %+v, want %+v", i, got, want[i])
		}
	}
}
