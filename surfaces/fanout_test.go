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
	ask      func(ctx context.Context, set questions.Set) (questions.Response, error)
	returned atomic.Bool
}

func (f *fake) Name() string { return f.name }

func (f *fake) Ask(ctx context.Context, set questions.Set) (questions.Response, error) {
	defer f.returned.Store(true)
	return f.ask(ctx, set)
}

// answers answers set after the channel after is closed (nil: at once).
func answers(name string, after <-chan struct{}, label string) *fake {
	return &fake{name: name, ask: func(ctx context.Context, set questions.Set) (questions.Response, error) {
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return questions.Response{}, ctx.Err()
			}
		}
		return questions.Response{
			SetID: set.ID, By: name + "-person", Surface: name, At: time.Now(),
			Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], label)},
		}, nil
	}}
}

// waits never answers; it returns once ctx ends.
func waits(name string) *fake {
	return &fake{name: name, ask: func(ctx context.Context, _ questions.Set) (questions.Response, error) {
		<-ctx.Done()
		return questions.Response{}, ctx.Err()
	}}
}

// fails returns err at once.
func fails(name string, err error) *fake {
	return &fake{name: name, ask: func(context.Context, questions.Set) (questions.Response, error) {
		return questions.Response{}, err
	}}
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
	defer close(slow)
	a, b, c := waits("a"), answers("b", nil, "SQLite"), answers("c", slow, "MySQL")
	resp, err := surfaces.Ask(ctxFor(t), nil, set, a, b, c)
	if err != nil {
		t.Fatalf("Ask = %v", err)
	}
	if resp.Surface != "b" || resp.Answers[0].Labels[0] != "SQLite" {
		t.Errorf("Ask = %+v, want b's answer", resp)
	}
	allReturned(t, a, b, c)
}

func TestAskFailingSurfaceLoggedOthersGoOn(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-fail")
	var log bytes.Buffer
	release := make(chan struct{})
	bad := &fake{name: "bad", ask: func(context.Context, questions.Set) (questions.Response, error) {
		defer close(release) // b answers only after bad failed
		return questions.Response{}, errors.New("boom")
	}}
	good := answers("good", release, "Postgres")
	resp, err := surfaces.Ask(ctxFor(t), logTo(&log), set, bad, good)
	if err != nil {
		t.Fatalf("Ask = %v", err)
	}
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
	liar := &fake{name: "liar", ask: func(context.Context, questions.Set) (questions.Response, error) {
		defer close(release)
		return questions.Response{SetID: set.ID, By: "x", Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "Oracle")}}, nil
	}}
	good := answers("good", release, "MySQL")
	resp, err := surfaces.Ask(ctxFor(t), nil, set, liar, good)
	if err != nil || resp.Surface != "good" {
		t.Fatalf("Ask = %+v, %v; want good's answer", resp, err)
	}

	_, err = surfaces.Ask(ctxFor(t), nil, set, fails("liar", nil))
	if err == nil || !strings.Contains(err.Error(), "liar") {
		t.Errorf("Ask with only an invalid answer = %v, want an error naming liar", err)
	}
}

func TestAskFillsSurfaceAndTime(t *testing.T) {
	t.Parallel()
	set := surfacetest.SingleChoice("fanout-fill")
	f := &fake{name: "bare", ask: func(context.Context, questions.Set) (questions.Response, error) {
		return questions.Response{SetID: set.ID, By: "me", Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "SQLite")}}, nil
	}}
	resp, err := surfaces.Ask(ctxFor(t), nil, set, f)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Surface != "bare" || resp.At.IsZero() {
		t.Errorf("Ask = %+v, want Surface and At filled in", resp)
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
			_, err := surfaces.Ask(ctxFor(t), nil, set, ss...)
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
	a := &fake{name: "a", ask: func(ctx context.Context, _ questions.Set) (questions.Response, error) {
		close(started)
		<-ctx.Done()
		return questions.Response{}, ctx.Err()
	}}
	b := waits("b")
	go func() { <-started; cancel() }()
	resp, err := surfaces.Ask(ctx, nil, set, a, b)
	if !errors.Is(err, context.Canceled) || resp.SetID != "" {
		t.Errorf("Ask = %+v, %v; want context.Canceled and no answer", resp, err)
	}
	allReturned(t, a, b)

	if _, err := surfaces.Ask(ctx, nil, set, answers("c", nil, "SQLite")); !errors.Is(err, context.Canceled) {
		t.Errorf("Ask with an ended context = %v, want context.Canceled", err)
	}
}

func TestCheckResponse(t *testing.T) {
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
			err := surfaces.CheckResponse(set, r)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckResponse = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("CheckResponse = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func BenchmarkAsk(b *testing.B) {
	set := surfacetest.SingleChoice("bench")
	ss := []surfaces.Surface{waits("a"), answers("b", nil, "SQLite"), waits("c")}
	ctx := context.Background()
	for b.Loop() {
		if _, err := surfaces.Ask(ctx, nil, set, ss...); err != nil {
			b.Fatal(err)
		}
	}
}
