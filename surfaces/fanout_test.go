package surfaces_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// fake is a surface whose Ask runs ask and records that it returned.
type fake struct {
	name     string
	ask      func(ctx context.Context, set questions.Set, answers surfaces.Answers) error
	returned atomic.Bool
}

func (f *fake) Name() string { return f.name }

func (f *fake) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	defer f.returned.Store(true)
	return f.ask(ctx, set, answers)
}

// answers offers an answer to set after the channel after is closed (nil:
// at once), then waits for ctx to end.
func answers(name string, after <-chan struct{}, label string) *fake {
	return &fake{name: name, ask: func(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if _, err := answers.Offer(ctx, questions.Response{
			SetID: set.ID, By: name + "-person", Surface: name, At: time.Now(),
			Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], label)},
		}); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}}
}

// waits never answers; it returns once ctx ends.
func waits(name string) *fake {
	return &fake{name: name, ask: func(ctx context.Context, _ questions.Set, _ surfaces.Answers) error {
		<-ctx.Done()
		return ctx.Err()
	}}
}

// fails returns err at once.
func fails(name string, err error) *fake {
	return &fake{name: name, ask: func(context.Context, questions.Set, surfaces.Answers) error {
		return err
	}}
}

// askUntilFinal runs the fan-out until set has a final answer in a, then
// cancels it and returns the answer and what Ask returned.
func askUntilFinal(t *testing.T, log *slog.Logger, set questions.Set, a *surfacetest.Answers, ss ...surfaces.Surface) (questions.Response, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- surfaces.Ask(ctx, log, set, a, ss...) }()
	resp, err := a.WaitFinal(ctxFor(t), set.ID)
	if err != nil {
		t.Fatalf("no final answer: %v; offers %+v", err, a.Offers(set.ID))
	}
	cancel()
	return resp, <-done
}

func newAnswers(set questions.Set) *surfacetest.Answers {
	a := surfacetest.NewAnswers()
	a.Add(set)
	return a
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	var mu sync.Mutex
	return slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func allReturned(t *testing.T, fs ...*fake) {
	t.Helper()
	for _, f := range fs {
		if !f.returned.Load() {
			t.Errorf("surface %s's Ask was still running when Ask returned", f.name)
		}
	}
}

func TestAskFirstAnswerWins(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-first")
	slow := make(chan struct{})
	a, b, c := waits("a"), answers("b", nil, "SQLite"), answers("c", slow, "MySQL")
	ans := newAnswers(set)
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() { done <- surfaces.Ask(ctx, nil, set, ans, a, b, c) }()
	resp, err := ans.WaitFinal(ctxFor(t), set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Surface != "b" || resp.Answers[0].Labels[0] != "SQLite" {
		t.Errorf("final answer = %+v, want b's answer", resp)
	}
	close(slow) // c offers too late
	if _, err := ans.WaitOffers(ctxFor(t), set.ID, 2); err != nil {
		t.Fatal(err)
	}
	if d := ans.Offers(set.ID)[1].Decision; !d.Closed || d.Taken || d.Final.Surface != "b" {
		t.Errorf("c's late offer decided %+v, want closed with b's answer", d)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Ask = %v, want context.Canceled", err)
	}
	allReturned(t, a, b, c)
}

func TestAskFailingSurfaceLoggedOthersGoOn(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-fail")
	var log bytes.Buffer
	release := make(chan struct{})
	bad := &fake{name: "bad", ask: func(context.Context, questions.Set, surfaces.Answers) error {
		defer close(release) // good answers only after bad failed
		return errors.New("boom")
	}}
	good := answers("good", release, "Postgres")
	resp, _ := askUntilFinal(t, logTo(&log), set, newAnswers(set), bad, good)
	if resp.Surface != "good" {
		t.Errorf("answer from %q, want good", resp.Surface)
	}
	if !strings.Contains(log.String(), "boom") || !strings.Contains(log.String(), "surface=bad") {
		t.Errorf("log does not report bad's failure:\n%s", log.String())
	}
}

func TestAskInvalidResponseIgnored(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-invalid")
	release := make(chan struct{})
	liar := &fake{name: "liar", ask: func(ctx context.Context, set questions.Set, a surfaces.Answers) error {
		d, err := a.Offer(ctx, questions.Response{SetID: set.ID, By: "x", Surface: "liar", Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "Oracle")}})
		if err == nil && d.Invalid == nil {
			t.Errorf("invalid answer decided %+v, want refused", d)
		}
		close(release) // good answers only after liar's answer was refused
		<-ctx.Done()
		return ctx.Err()
	}}
	good := answers("good", release, "MySQL")
	resp, _ := askUntilFinal(t, nil, set, newAnswers(set), liar, good)
	if resp.Surface != "good" {
		t.Fatalf("final answer = %+v; want good's answer", resp)
	}

	err := surfaces.Ask(ctxFor(t), nil, set, newAnswers(set), fails("liar", errors.New("broken")))
	if err == nil || !strings.Contains(err.Error(), "liar") {
		t.Errorf("Ask with only a failing surface = %v, want an error naming liar", err)
	}
}

func TestAskReturnsNilOnceClosed(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-closed")
	closes := &fake{name: "closes", ask: func(context.Context, questions.Set, surfaces.Answers) error { return nil }}
	if err := surfaces.Ask(ctxFor(t), nil, set, newAnswers(set), closes, fails("bad", errors.New("boom"))); err != nil {
		t.Errorf("Ask = %v, want nil once a surface said the set is closed", err)
	}
}

func TestAskErrors(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-errors")
	boom := errors.New("boom")
	unavailable := func(name string) *fake {
		return fails(name, errors.Join(errors.New("stdin closed"), surfaces.ErrUnavailable))
	}
	tests := []struct {
		name            string
		ss              []*fake
		wantUnavailable bool
		wantIs          []error
		wantText        []string
	}{
		{"NoSurface", nil, true, nil, nil},
		{"AllUnavailable", []*fake{unavailable("terminal"), unavailable("other")}, true, nil, []string{"terminal", "other"}},
		{"AllFailed", []*fake{fails("github", boom), unavailable("terminal")}, false, []error{boom, surfaces.ErrUnavailable}, []string{"github: boom", "terminal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ss := make([]surfaces.Surface, len(tt.ss))
			for i, f := range tt.ss {
				ss[i] = f
			}
			err := surfaces.Ask(ctxFor(t), nil, set, newAnswers(set), ss...)
			if err == nil {
				t.Fatal("Ask = nil error")
			}
			if tt.wantUnavailable && !errors.Is(err, surfaces.ErrUnavailable) {
				t.Errorf("Ask = %v, want it to wrap ErrUnavailable", err)
			}
			for _, e := range tt.wantIs {
				if !errors.Is(err, e) {
					t.Errorf("Ask = %v, want it to wrap %v", err, e)
				}
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Ask = %v, want it to say %q", err, s)
				}
			}
			allReturned(t, tt.ss...)
		})
	}
}

func TestAskContextEnds(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-ctx")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	a := &fake{name: "a", ask: func(ctx context.Context, _ questions.Set, _ surfaces.Answers) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}}
	b := waits("b")
	go func() { <-started; cancel() }()
	ans := newAnswers(set)
	if err := surfaces.Ask(ctx, nil, set, ans, a, b); !errors.Is(err, context.Canceled) {
		t.Errorf("Ask = %v; want context.Canceled", err)
	}
	if _, ok := ans.Final(set.ID); ok {
		t.Error("set answered, want no answer")
	}
	allReturned(t, a, b)

	if err := surfaces.Ask(ctx, nil, set, ans, answers("c", nil, "SQLite")); !errors.Is(err, context.Canceled) {
		t.Errorf("Ask with an ended context = %v, want context.Canceled", err)
	}
}

func TestValidResponse(t *testing.T) {
	t.Parallel()
	set := surfacetest.NewSet("check").Single().Multi().Free().Set()
	q1, q2, q3 := set.Questions[0], set.Questions[1], set.Questions[2]
	ok := func() questions.Response {
		return questions.Response{SetID: set.ID, Answers: []questions.Answer{
			surfacetest.Choose(q1, "SQLite"), surfacetest.Choose(q2, "Linux", "macOS"), surfacetest.Say(q3, "orc"),
		}}
	}
	tests := []struct {
		name   string
		change func(*questions.Response)
		want   string // "" for valid
	}{
		{"Valid", func(*questions.Response) {}, ""},
		{"WrongSet", func(r *questions.Response) { r.SetID = "other" }, "is to set \"other\""},
		{"MissingAnswer", func(r *questions.Response) { r.Answers = r.Answers[:2] }, "2 answers for 3 questions"},
		{"WrongOrder", func(r *questions.Response) { r.Answers[0], r.Answers[1] = r.Answers[1], r.Answers[0] }, "is to question"},
		{"Empty", func(r *questions.Response) { r.Answers[2].Text = "" }, "is empty"},
		{"TwoForSingle", func(r *questions.Response) { r.Answers[0].Labels = []string{"SQLite", "MySQL"} }, "takes one"},
		{"UnknownLabel", func(r *questions.Response) { r.Answers[1].Labels = []string{"BeOS"} }, "not an option"},
		{"TextNotAccepted", func(r *questions.Response) { r.Answers[0].Text = "hm" }, "options only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ok()
			tt.change(&r)
			err := surfacetest.ValidResponse(set, r)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidResponse = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidResponse = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestCheckPartial(t *testing.T) {
	t.Parallel()
	set := surfacetest.NewSet("partial").Single().Multi().Free().Set()
	q1, q2, q3 := set.Questions[0], set.Questions[1], set.Questions[2]
	tests := []struct {
		name string
		ans  []questions.Answer
		want string // "" for valid
	}{
		{"First", []questions.Answer{surfacetest.Choose(q1, "SQLite")}, ""},
		{"Last", []questions.Answer{surfacetest.Say(q3, "orc")}, ""},
		{"TwoInOrder", []questions.Answer{surfacetest.Choose(q1, "SQLite"), surfacetest.Say(q3, "orc")}, ""},
		{"None", nil, "answers no question"},
		{"OutOfOrder", []questions.Answer{surfacetest.Say(q3, "orc"), surfacetest.Choose(q1, "SQLite")}, "out of order"},
		{"Twice", []questions.Answer{surfacetest.Choose(q1, "SQLite"), surfacetest.Choose(q1, "MySQL")}, "out of order or twice"},
		{"Unknown", []questions.Answer{{QuestionID: "qnope", Text: "x"}}, "does not have"},
		{"UnknownLabel", []questions.Answer{surfacetest.Choose(q2, "BeOS")}, "not an option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := questions.CheckPartial(set, questions.Response{SetID: set.ID, Answers: tt.ans})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckPartial = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("CheckPartial = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func BenchmarkAsk(b *testing.B) {
	set := surfacetest.SingleChoice("bench")
	ss := []surfaces.Surface{waits("a"), answers("b", nil, "SQLite"), waits("c")}
	for b.Loop() {
		ans := newAnswers(set)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- surfaces.Ask(ctx, nil, set, ans, ss...) }()
		if _, err := ans.WaitFinal(context.Background(), set.ID); err != nil {
			b.Fatal(err)
		}
		cancel()
		<-done
	}
}
