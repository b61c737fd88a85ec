package surfacetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// The cases Run runs against a surface, one function each.

func testSingleChoice(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{Choose(set.Questions[0], "SQLite")})
}

func testMultiSelect(t *testing.T, b Backend) {
	set := MultiSelect(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{Choose(set.Questions[0], "Linux", "Windows")})
}

func testFreeText(t *testing.T, b Backend) {
	set := FreeText(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{Say(set.Questions[0], "orchestrate")})
}

func testOther(t *testing.T, b Backend) {
	set := Other(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{Say(set.Questions[0], "MPL-2.0 please")})
}

func testTwoQuestions(t *testing.T, b Backend) {
	set := TwoQuestions(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{
		Choose(set.Questions[0], "MySQL"),
		Choose(set.Questions[1], "macOS"),
	})
}

func testHostile(t *testing.T, b Backend) {
	set := Hostile(setName(t, ""))
	askAndAnswer(t, b, set, []questions.Answer{Choose(set.Questions[0], "No")})
}

func testStranger(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	s := b.New(t)
	answers := newAnswers(set)
	start := time.Now()
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	if !waitPosted(t, b, set) {
		stop(t, b, cancel, ch, "Ask")
		return
	}
	b.Intrude(t, set, []questions.Answer{Choose(set.Questions[0], "Postgres")})
	want := []questions.Answer{Choose(set.Questions[0], "MySQL")}
	b.Answer(t, set, want)
	resp, ok := waitFinal(t, b, answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	if !ok {
		return
	}
	CheckResponse(t, s.Name(), set, resp, want, start)
	for i, o := range answers.Offers(set.ID) {
		if len(o.Response.Answers) > 0 && SameAnswer(o.Response.Answers[0], Choose(set.Questions[0], "Postgres")) {
			t.Errorf("offer %d is the stranger's answer %+v: a surface offers only answers of people allowed to answer", i, o.Response)
		}
	}
}

// testInvalid: an answer the store refuses gets the reason shown, and the set
// stays open for the next answer.
func testInvalid(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	s := b.New(t)
	answers := newAnswers(set)
	answers.Refuse(set.ID, errors.New(refusal))
	start := time.Now()
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	answer(t, b, set, []questions.Answer{Choose(set.Questions[0], "Postgres")})
	wctx, wcancel := context.WithTimeout(context.Background(), b.Timeout)
	offers, err := answers.WaitOffers(wctx, set.ID, 1)
	wcancel()
	if err != nil {
		t.Fatalf("the answer was not offered within %v", b.Timeout)
	}
	if offers[0].Decision.Invalid == nil || offers[0].Decision.Taken {
		t.Fatalf("first offer decided %+v, want refused", offers[0].Decision)
	}
	waitShown(t, b, set, refusal, "refused answer")
	if _, ok := answers.Final(set.ID); ok {
		t.Fatal("set answered by a refused answer")
	}
	select {
	case err := <-ch:
		t.Fatalf("Ask returned %v after a refused answer, want it to go on waiting", err)
	default:
	}
	want := []questions.Answer{Choose(set.Questions[0], "MySQL")}
	b.Answer(t, set, want)
	resp, ok := waitFinal(t, b, answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	if ok {
		CheckResponse(t, s.Name(), set, resp, want, start)
		waitShown(t, b, set, b.Person, "taken answer, after the Ask's context ended")
	}
}

// testAnsweredElsewhere: an answer given after the set was answered on
// another surface is told "answered elsewhere by …".
func testAnsweredElsewhere(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	s := b.New(t)
	answers := newAnswers(set)
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	ch := startAsk(ctx, s, set, answers)
	if !waitPosted(t, b, set) {
		stop(t, b, cancel, ch, "Ask")
		return
	}
	final := questions.Response{SetID: set.ID, By: elsewhere, Surface: "elsewhere", At: time.Now(),
		Answers: []questions.Answer{Choose(set.Questions[0], "SQLite")}}
	answers.Close(set.ID, &final)
	b.Answer(t, set, []questions.Answer{Choose(set.Questions[0], "MySQL")})
	wctx, wcancel := context.WithTimeout(ctx, b.Timeout)
	offers, err := answers.WaitOffers(wctx, set.ID, 1)
	wcancel()
	if err != nil {
		t.Fatalf("the late answer was not offered within %v", b.Timeout)
	}
	if d := offers[0].Decision; !d.Closed || d.Taken || d.Final == nil || d.Final.By != elsewhere {
		t.Errorf("late offer decided %+v, want closed with the final answer", d)
	}
	waitShown(t, b, set, elsewhere, "late answer")
	stop(t, b, cancel, ch, "closed set "+set.ID)
}

func testCancel(t *testing.T, b Backend) {
	t.Run("WhileWaiting", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := startAsk(ctx, s, set, newAnswers(set))
		waitPosted(t, b, set)
		cancel()
		checkCancelled(t, wait(t, b, ch, "cancelled Ask"), ctx)
	})
	t.Run("Deadline", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		checkCancelled(t, wait(t, b, startAsk(ctx, s, set, newAnswers(set)), "Ask past its deadline"), ctx)
	})
	t.Run("AlreadyCancelled", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkCancelled(t, wait(t, b, startAsk(ctx, s, set, newAnswers(set)), "Ask with a cancelled context"), ctx)
	})
}

func checkCancelled(t *testing.T, err error, ctx context.Context) {
	t.Helper()
	if !errors.Is(err, ctx.Err()) {
		t.Errorf("Ask after its context ended = %v, want %v", err, ctx.Err())
	}
}

// askCancel asks set on s and cancels once it is posted.
func askCancel(t *testing.T, b Backend, s surfaces.Surface, set questions.Set, answers *Answers, what string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := startAsk(ctx, s, set, answers)
	if b.Posted != nil {
		waitPosted(t, b, set)
	} else {
		// Nothing to wait for; give the surface a moment to show set.
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	checkCancelled(t, wait(t, b, ch, what), ctx)
}

// testIdempotent: asking again, on the same surface or a new one, posts
// nothing new.
func testIdempotent(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	s := b.New(t)
	askCancel(t, b, s, set, answers, "first Ask")
	askCancel(t, b, s, set, answers, "second Ask on the same surface")
	askCancel(t, b, b.New(t), set, answers, "Ask on a new surface")
	checkPosted(t, b, set)

	want := []questions.Answer{Choose(set.Questions[0], "Postgres")}
	start := time.Now()
	s = b.New(t)
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	answer(t, b, set, want)
	resp, ok := waitFinal(t, b, answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	if ok {
		CheckResponse(t, s.Name(), set, resp, want, start)
		waitShown(t, b, set, b.Person, "taken answer, after the Ask's context ended")
	}
	checkPosted(t, b, set)
}

// testRestart: an answer given while no Ask ran (the process was down) is
// offered by the next Ask.
func testRestart(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	answers := newAnswers(set)
	askCancel(t, b, b.New(t), set, answers, "Ask before the restart")
	want := []questions.Answer{Choose(set.Questions[0], "Postgres")}
	start := time.Now()
	answer(t, b, set, want) // no Ask is running
	if n := len(answers.Offers(set.ID)); n != 0 {
		t.Errorf("%d offers while no Ask ran", n)
	}
	s := b.New(t)
	ch, cancel := askAsRunner(b, s, set, answers)
	defer cancel()
	resp, ok := waitFinal(t, b, answers, set)
	stop(t, b, cancel, ch, "answered set "+set.ID)
	if ok {
		CheckResponse(t, s.Name(), set, resp, want, start)
		// The answer given while no process ran is shown as taken by the
		// Ask that found it, although the runner ended that Ask as soon as
		// the store had it.
		waitShown(t, b, set, b.Person, "answer given while down, after the Ask's context ended")
	}
	checkPosted(t, b, set)
}

func checkPosted(t *testing.T, b Backend, set questions.Set) {
	t.Helper()
	if b.Posted == nil {
		return
	}
	if n := b.Posted(t, set); n != 1 {
		t.Errorf("set %s was posted %d times, want exactly once", set.ID, n)
	}
}

func testConcurrent(t *testing.T, b Backend) {
	sets := []questions.Set{SingleChoice(setName(t, "a")), SingleChoice(setName(t, "b"))}
	wants := [][]questions.Answer{
		{Choose(sets[0].Questions[0], "Postgres")},
		{Choose(sets[1].Questions[0], "MySQL")},
	}
	s := b.New(t)
	answers := newAnswers(sets...)
	start := time.Now()
	chs := make([]<-chan error, len(sets))
	cancels := make([]context.CancelFunc, len(sets))
	for i, set := range sets {
		chs[i], cancels[i] = askAsRunner(b, s, set, answers)
		defer cancels[i]()
	}
	// Answer in the reverse order, each from its own goroutine: a surface
	// that shows one set at a time shows the second only once the first
	// is answered.
	var wg sync.WaitGroup
	for i := len(sets) - 1; i >= 0; i-- {
		wg.Go(func() { answer(t, b, sets[i], wants[i]) })
	}
	for i, set := range sets {
		resp, ok := waitFinal(t, b, answers, set)
		if !ok {
			continue
		}
		CheckResponse(t, s.Name(), set, resp, wants[i], start)
	}
	wg.Wait()
	for i := range sets {
		cancels[i]()
		waitShown(t, b, sets[i], b.Person, fmt.Sprintf("taken answer %d, after the Ask's context ended", i))
	}
	for i := range sets {
		if err := wait(t, b, chs[i], fmt.Sprintf("concurrent Ask %d", i)); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("concurrent Ask %d = %v, want nil or context.Canceled", i, err)
		}
	}
}
