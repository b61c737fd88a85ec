// Package surfacetest is the conformance suite every surfaces.Surface runs,
// and the question sets they all test with.
//
// A surface's test builds a Backend (a fake of the service behind the
// surface, and the ways people act on it) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		srv := newFakeServer(t)
//		surfacetest.Run(t, surfacetest.Backend{
//			New:    func(t *testing.T) surfaces.Surface { return newSurface(t, srv) },
//			Answer: srv.answer,
//			Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true},
//		})
//	}
//
// The subtests run one after another on the same Backend; each uses its own
// sets (distinct IDs), so a backend's state may be shared by all of them.
package surfacetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
// Answer, Intrude and Posted may be called from goroutines other than the
// test's, and concurrently for different sets: report problems with
// t.Errorf (t.Fatal only stops the test from the test's own goroutine).
type Backend struct {
	// New returns a new surface on the same backend state, as a process
	// restart would make. Run calls it once per subtest, and again where it
	// checks idempotence.
	New func(t *testing.T) surfaces.Surface

	// Answer makes a person allowed to answer give answers (one per question
	// of set, in order) the way the surface lets people: typing a reply,
	// clicking a button... When Posted is set, Run calls Answer only after
	// set has been posted.
	Answer func(t *testing.T, set questions.Set, answers []questions.Answer)

	// Intrude makes someone NOT allowed to answer try to answer. Nil if the
	// surface has no strangers (the terminal).
	Intrude func(t *testing.T, set questions.Set, answers []questions.Answer)

	// Posted reports how many times set was posted (comments, messages).
	// Nil if not applicable.
	Posted func(t *testing.T, set questions.Set) int

	Features Features

	// Timeout bounds each wait for an answer (default one minute: the
	// suite runs under -race on loaded machines).
	Timeout time.Duration
}

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
		{"Cancel", "", testCancel},
		{"Idempotent", "", testIdempotent},
		{"Concurrent", "", testConcurrent},
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

// result is what one Ask returned.
type result struct {
	resp questions.Response
	err  error
}

// startAsk runs s.Ask(ctx, set) in a goroutine; the channel delivers its result.
func startAsk(ctx context.Context, s surfaces.Surface, set questions.Set) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := s.Ask(ctx, set)
		ch <- result{resp, err}
	}()
	return ch
}

// wait waits for an Ask's result, failing the test after b.Timeout.
func wait(t *testing.T, b Backend, ch <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(b.Timeout + 10*time.Second):
		t.Fatalf("%s: Ask did not return within %v", what, b.Timeout+10*time.Second)
		return result{}
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

// answer waits for set to be posted, then has an allowed person answer it.
func answer(t *testing.T, b Backend, set questions.Set, answers []questions.Answer) {
	t.Helper()
	if waitPosted(t, b, set) {
		b.Answer(t, set, answers)
	}
}

// askAndAnswer asks set on a new surface, answers it and checks the response.
func askAndAnswer(t *testing.T, b Backend, set questions.Set, answers []questions.Answer) {
	t.Helper()
	s := b.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	start := time.Now()
	ch := startAsk(ctx, s, set)
	answer(t, b, set, answers)
	r := wait(t, b, ch, "answered set "+set.ID)
	if r.err != nil {
		t.Fatalf("Ask(%s) = %v, want an answer", set.ID, r.err)
	}
	CheckResponse(t, s.Name(), set, r.resp, answers, start)
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
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	start := time.Now()
	ch := startAsk(ctx, s, set)
	if !waitPosted(t, b, set) {
		return
	}
	b.Intrude(t, set, []questions.Answer{Choose(set.Questions[0], "Postgres")})
	want := []questions.Answer{Choose(set.Questions[0], "MySQL")}
	b.Answer(t, set, want)
	r := wait(t, b, ch, "answered set "+set.ID)
	if r.err != nil {
		t.Fatalf("Ask = %v, want the allowed person's answer", r.err)
	}
	CheckResponse(t, s.Name(), set, r.resp, want, start)
}

func testCancel(t *testing.T, b Backend) {
	t.Run("WhileWaiting", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := startAsk(ctx, s, set)
		waitPosted(t, b, set)
		cancel()
		r := wait(t, b, ch, "cancelled Ask")
		checkCancelled(t, r, ctx)
	})
	t.Run("Deadline", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		r := wait(t, b, startAsk(ctx, s, set), "Ask past its deadline")
		checkCancelled(t, r, ctx)
	})
	t.Run("AlreadyCancelled", func(t *testing.T) {
		set := SingleChoice(setName(t, ""))
		s := b.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := wait(t, b, startAsk(ctx, s, set), "Ask with a cancelled context")
		checkCancelled(t, r, ctx)
	})
}

func checkCancelled(t *testing.T, r result, ctx context.Context) {
	t.Helper()
	if !errors.Is(r.err, ctx.Err()) {
		t.Errorf("Ask after its context ended = %v, want %v", r.err, ctx.Err())
	}
	if r.resp.SetID != "" || len(r.resp.Answers) != 0 {
		t.Errorf("Ask after its context ended returned a response %+v, want none", r.resp)
	}
}

func testIdempotent(t *testing.T, b Backend) {
	set := SingleChoice(setName(t, ""))
	s := b.New(t)
	askCancel := func(s surfaces.Surface, what string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := startAsk(ctx, s, set)
		if b.Posted != nil {
			waitPosted(t, b, set)
		} else {
			// Nothing to wait for; give the surface a moment to show set.
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		checkCancelled(t, wait(t, b, ch, what), ctx)
	}
	askCancel(s, "first Ask")
	askCancel(s, "second Ask on the same surface")
	askCancel(b.New(t), "Ask on a new surface")
	checkPosted(t, b, set)

	want := []questions.Answer{Choose(set.Questions[0], "Postgres")}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	s = b.New(t)
	var ch <-chan result
	if b.Features.AnswerWhileDown {
		answer(t, b, set, want) // no Ask is running
		ch = startAsk(ctx, s, set)
	} else {
		ch = startAsk(ctx, s, set)
		answer(t, b, set, want)
	}
	r := wait(t, b, ch, "Ask after answering")
	if r.err != nil {
		t.Fatalf("Ask = %v, want the answer given", r.err)
	}
	CheckResponse(t, s.Name(), set, r.resp, want, start)
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
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	start := time.Now()
	chs := make([]<-chan result, len(sets))
	for i, set := range sets {
		chs[i] = startAsk(ctx, s, set)
	}
	// Answer in the reverse order, each from its own goroutine: a surface
	// that shows one set at a time shows the second only once the first
	// is answered.
	var wg sync.WaitGroup
	for i := len(sets) - 1; i >= 0; i-- {
		wg.Go(func() { answer(t, b, sets[i], wants[i]) })
	}
	for i, set := range sets {
		r := wait(t, b, chs[i], fmt.Sprintf("concurrent Ask %d", i))
		if r.err != nil {
			t.Errorf("Ask(%s) = %v, want an answer", set.ID, r.err)
			continue
		}
		CheckResponse(t, s.Name(), set, r.resp, wants[i], start)
	}
	wg.Wait()
}
