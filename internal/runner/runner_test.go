package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// The loop's tests run the REAL Claude Code CLI against the fake API, with
// in-test surfaces standing for people.

const authMarker = `<!--QUESTION:{"questions":[{"question":"Which auth method?","header":"Auth","options":[` +
	`{"label":"OAuth2","description":"Use OAuth2"},{"label":"JWT","description":"Stateless"}]}]}-->`

func rules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		{When: "BEGIN ANSWERS", Respond: func(r fakeapi.Request) fakeapi.Reply {
			for _, l := range []string{"OAuth2", "JWT"} {
				if strings.Contains(r.LastUserText, l) {
					return fakeapi.Reply{Text: "Implemented with " + l + "."}
				}
			}
			return fakeapi.Reply{Text: "Implemented my own way."}
		}},
	}
}

// person is a surface whose people answer when the test says so.
type person struct {
	name     string
	answers  chan []questions.Answer
	mu       sync.Mutex
	asked    []string
	remind   int
	resolve  []questions.Response
	resumed  int
	fail     int  // the next Asks that fail at once
	unposted bool // Remind says the set is not posted there yet
}

func newPerson(name string) *person {
	return &person{name: name, answers: make(chan []questions.Answer, 1)}
}

func (p *person) Name() string { return p.name }

func (p *person) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	p.mu.Lock()
	p.asked = append(p.asked, set.ID)
	fail := p.fail
	if p.fail > 0 {
		p.fail--
	}
	p.mu.Unlock()
	if fail > 0 {
		return errors.New("502 Bad Gateway")
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case a := <-p.answers:
			d, err := answers.Offer(ctx, questions.Response{SetID: set.ID, Answers: a, By: p.name + "-user", Surface: p.name, At: time.Now()})
			if err != nil {
				return err
			}
			if d.Closed {
				return nil
			}
		}
	}
}

func (p *person) Remind(ctx context.Context, set questions.Set) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unposted {
		return fmt.Errorf("remind %s: %w", set.ID, surfaces.ErrNotAsked)
	}
	p.remind++
	return nil
}

func (p *person) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resolve = append(p.resolve, resp)
	return nil
}

func (p *person) Resumed(ctx context.Context, set questions.Set) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumed++
	return nil
}

func (p *person) stats() (asked, remind, resolve, resumed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked), p.remind, len(p.resolve), p.resumed
}

var (
	_ surfaces.Resolver       = (*person)(nil)
	_ surfaces.Reminder       = (*person)(nil)
	_ surfaces.ResumeNotifier = (*person)(nil)
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type harness struct {
	t      *testing.T
	fake   *fakeapi.Server
	store  *store.Store
	runner *runner.Runner
	env    map[string]string
	events chan runner.Event
	// agent is what runs are driven with: the executor of the real CLI,
	// unless a test changes it before driving.
	agent runner.Agent
	// resolved counts the calls of Config.Resolve.
	resolved atomic.Int32
}

func newHarness(t *testing.T, surfs []surfaces.Surface, pol runner.Policy, lim runner.Limits, rs ...fakeapi.Rule) *harness {
	t.Helper()
	claude := clitest.Claude(t)
	f := fakeapi.New(rs...)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	env := clitest.Env(t, ts.URL)
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ex, err := executor.New(executor.Config{Command: claude, Env: env, AppendSystemPrompt: questions.ProtocolPrompt(), Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, fake: f, store: st, env: env, events: make(chan runner.Event, 1000), agent: ex}
	h.runner, err = runner.New(runner.Config{
		Store: st,
		Resolve: func(store.Run) (runner.Resolved, error) {
			h.resolved.Add(1)
			return runner.Resolved{Agent: h.agent, Surfaces: surfs, Policy: pol}, nil
		},
		Observe: func(ev runner.Event) {
			select {
			case h.events <- ev:
			default:
			}
		},
		Limits: lim,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:  func(ctx context.Context, d time.Duration) error { return ctx.Err() }, // no real backoff in tests
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) drive(prompt string) (store.Run, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wd := h.t.TempDir()
	run, err := h.runner.Create(ctx, runner.NewRun{Prompt: prompt, WorkDir: wd, Surfaces: []string{"test"}})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.runner.Drive(ctx, run.ID)
}

func (h *harness) answersSent() []string {
	var out []string
	for _, r := range h.fake.Requests() {
		if strings.Contains(r.LastUserText, "BEGIN ANSWERS") {
			out = append(out, r.LastUserText)
		}
	}
	return out
}

func TestPresetAnswerIsNeverAsked(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{Presets: []runner.Preset{{Match: "auth", Answer: "JWT"}}}, runner.Limits{}, rules()...)
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Implemented with JWT." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	if asked, _, _, _ := p.stats(); asked != 0 {
		t.Fatalf("the surface was asked %d times; a preset answer must never be asked", asked)
	}
	if a := h.answersSent(); len(a) != 1 || !strings.Contains(a[0], "spec") {
		t.Fatalf("answers sent: %q", a)
	}
}

func TestReminderThenEscalation(t *testing.T) {
	t.Parallel()
	slow, boss := newPerson("test"), newPerson("boss")
	pol := runner.Policy{RemindEvery: 400 * time.Millisecond, EscalateTo: boss}
	h := newHarness(t, []surfaces.Surface{slow}, pol, runner.Limits{}, rules()...)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventEscalated {
				boss.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"OAuth2"}}}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Implemented with OAuth2." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	asked, remind, resolve, resumed := slow.stats()
	if asked < 1 || remind < 1 || resolve != 1 || resumed != 1 {
		t.Fatalf("first surface: asked %d, reminded %d, resolved %d, resumed %d", asked, remind, resolve, resumed)
	}
	// The surface that took the answer showed it; it is not asked to
	// resolve the set (surfaces.Resolver).
	if asked, _, resolve, _ := boss.stats(); asked != 1 || resolve != 0 {
		t.Fatalf("escalation surface: asked %d, resolved %d; want asked once, not resolved", asked, resolve)
	}
	sets, _ := h.store.QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if len(sets) != 1 || sets[0].RemindedAt.IsZero() || sets[0].EscalatedAt.IsZero() || sets[0].Response.Surface != "boss" {
		t.Fatalf("stored set = %+v", sets)
	}
}

// TestNoReminderBeforeThePost: a surface that has not posted the question
// yet reminds nobody, and the run reports no reminder.
func TestNoReminderBeforeThePost(t *testing.T) {
	t.Parallel()
	slow := newPerson("test")
	slow.unposted = true
	pol := runner.Policy{RemindEvery: 100 * time.Millisecond}
	h := newHarness(t, []surfaces.Surface{slow}, pol, runner.Limits{}, rules()...)
	reminders := make(chan int, 1)
	go func() {
		n := 0
		for ev := range h.events {
			switch ev.Kind {
			case runner.EventReminder:
				n++
			case runner.EventQuestion:
				go func() {
					time.Sleep(time.Second) // several reminders due meanwhile
					slow.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"OAuth2"}}}
				}()
			case runner.EventAnswer:
				reminders <- n
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	if n := <-reminders; n != 0 {
		t.Errorf("%d reminder events for a question posted nowhere", n)
	}
}

func TestOnTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action, option string
		status         store.RunStatus
		want           string // in the final text or the error
	}{
		{"fail", "", store.RunFailed, "got no answer within 300ms"},
		{"default", "JWT", store.RunDone, "Implemented with JWT."},
		{"skip", "", store.RunDone, "Implemented my own way."},
	} {
		t.Run(tc.action, func(t *testing.T) {
			t.Parallel()
			p := newPerson("test")
			pol := runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: tc.action, Option: tc.option}}
			h := newHarness(t, []surfaces.Surface{p}, pol, runner.Limits{}, rules()...)
			run, err := h.drive("Implement spec X")
			if err != nil || run.Status != tc.status || !strings.Contains(run.FinalText+run.Error, tc.want) {
				t.Fatalf("run = %s %q %q, %v; want %s with %q", run.Status, run.FinalText, run.Error, err, tc.status, tc.want)
			}
			if tc.action == "skip" {
				if a := h.answersSent(); len(a) != 1 || !strings.Contains(a[0], "Nobody answered") {
					t.Fatalf("answers sent: %q", a)
				}
			}
			if _, _, resolve, _ := p.stats(); tc.action != "fail" && resolve != 1 {
				t.Fatalf("the surface was not told the question was settled")
			}
		})
	}
}

func TestRateLimitIsRetried(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{RateLimitRetries: 2},
		fakeapi.Rule{Times: 1, Reply: fakeapi.Reply{Status: 429}},
		fakeapi.Rule{When: "rate limit", Reply: fakeapi.Reply{Text: "Recovered and done."}},
	)
	run, err := h.drive("Do the thing")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Recovered and done." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	turns, _ := h.store.Turns(context.Background(), run.ID)
	if len(turns) != 2 || turns[0].Result.Category != "rate_limit" || turns[1].Kind != store.TurnRetry || !turns[1].Resume {
		t.Fatalf("turns = %+v", turns)
	}
}

func TestRateLimitGivesUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, runner.Policy{}, runner.Limits{RateLimitRetries: 1}, fakeapi.Rule{Reply: fakeapi.Reply{Status: 429}})
	run, err := h.drive("Do the thing")
	if err != nil || run.Status != store.RunFailed || !strings.Contains(run.Error, "rate limited 2 times") {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	if n := len(h.fake.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// onlyAgent is an agent whose CLI session file the runner cannot move
// (it is not a runner.SessionFiles).
type onlyAgent struct{ runner.Agent }

// TestSessionNotFoundFailsClearly: the CLI's session store disappears while
// the question waits, and the runner cannot write the session back from the
// store (onlyAgent): the resume fails, saying why, without reaching the
// model. (With an executor, the store's copy is restored: sessions_test.go.)
func TestSessionNotFoundFailsClearly(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{}, rules()...)
	h.agent = onlyAgent{h.agent}
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				// The CLI's session store disappears while the question waits.
				os.RemoveAll(filepath.Join(h.env["HOME"], ".claude", "projects"))
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunFailed || !strings.Contains(run.Error, "no session") {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d requests: the resume of a missing session must not reach the model, nor loop", n)
	}
}

func TestMaxQuestionRounds(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{MaxQuestionRounds: 1},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Again?\n" + authMarker}})
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunFailed || !strings.Contains(run.Error, "more than 1 rounds") {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
}

func TestCancelledDriveLeavesRunResumable(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{}, rules()...)
	ctx, cancel := context.WithCancel(context.Background())
	run, err := h.runner.Create(ctx, runner.NewRun{Prompt: "Implement spec X", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		asked := 0
		for ev := range h.events {
			if ev.Kind != runner.EventQuestion {
				continue
			}
			asked++
			if asked == 1 {
				cancel() // shut down while the question waits
				continue
			}
			p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"OAuth2"}}}
			return
		}
	}()
	got, err := h.runner.Drive(ctx, run.ID)
	if !errors.Is(err, context.Canceled) || got.Status != store.RunWaiting {
		t.Fatalf("after cancel: %s, %v", got.Status, err)
	}
	got, err = h.runner.Drive(context.Background(), run.ID)
	if err != nil || got.Status != store.RunDone || got.FinalText != "Implemented with OAuth2." {
		t.Fatalf("resumed: %s %q %q, %v", got.Status, got.FinalText, got.Error, err)
	}
	if n := len(h.answersSent()); n != 1 {
		t.Fatalf("answers sent %d times", n)
	}
}

// reporter is a person that also shows progress.
type reporter struct {
	*person
	pmu  sync.Mutex
	seen []surfaces.RunProgress
}

func (r *reporter) Progress(ctx context.Context, p surfaces.RunProgress) error {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.seen = append(r.seen, p)
	return nil
}

func TestProgressIsReported(t *testing.T) {
	t.Parallel()
	rep := &reporter{person: newPerson("test")}
	h := newHarness(t, []surfaces.Surface{rep}, runner.Policy{}, runner.Limits{}, rules()...)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				rep.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	rep.pmu.Lock()
	defer rep.pmu.Unlock()
	if len(rep.seen) < 2 {
		t.Fatalf("progress reported %d times", len(rep.seen))
	}
	last := rep.seen[len(rep.seen)-1]
	if !last.Final || last.Step != "done" || last.Summary != "Implemented with JWT." || last.Turn != 2 || last.CostUSD <= 0 || last.RunID != run.ID {
		t.Fatalf("final progress = %+v", last)
	}
	for _, p := range rep.seen[:len(rep.seen)-1] {
		if p.Final {
			t.Fatalf("a progress before the last is final: %+v", p)
		}
	}
}

// TestResolvedOncePerDrive: a run's agent, surfaces and policy are resolved
// once per Drive, not per question round or turn.
func TestResolvedOncePerDrive(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{}, rules()...)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	if n := h.resolved.Load(); n != 1 {
		t.Fatalf("Resolve called %d times for one drive with two turns and a question, want 1", n)
	}
}

// TestResolveErrorFailsTheRun: a run whose spec can no longer be resolved
// fails, saying why, instead of running without its settings.
func TestResolveErrorFailsTheRun(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := runner.New(runner.Config{Store: st, Resolve: func(run store.Run) (runner.Resolved, error) {
		return runner.Resolved{}, errors.New("run x: load its spec: no such file")
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := r.Create(ctx, runner.NewRun{Prompt: "Implement spec X", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Drive(ctx, run.ID)
	if err != nil || got.Status != store.RunFailed || !strings.Contains(got.Error, "load its spec") {
		t.Fatalf("run = %s %q, %v; want failed saying why", got.Status, got.Error, err)
	}
}

// TestSurfacesAllFailAreRetried: when posting the question fails on every
// surface (a 502), the run keeps waiting and asks again after a backoff;
// the answer given then resumes it.
func TestSurfacesAllFailAreRetried(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	p.fail = 2
	h := newHarness(t, []surfaces.Surface{p}, runner.Policy{}, runner.Limits{AskRetryBackoff: 10 * time.Millisecond}, rules()...)
	retries := make(chan int, 1)
	go func() {
		n := 0
		for ev := range h.events {
			switch ev.Kind {
			case runner.EventRetry:
				n++
			case runner.EventQuestion:
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
			case runner.EventRunEnded:
				retries <- n
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone || run.FinalText != "Implemented with JWT." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	if asked, _, _, _ := p.stats(); asked != 3 {
		t.Errorf("asked %d times, want 2 failures then the ask that was answered", asked)
	}
	if n := <-retries; n != 2 {
		t.Errorf("%d retry events, want 2", n)
	}
}

// TestCLISlotsBoundTheCLIs: with CLISlots of one, three runs driven at once
// never have two agent CLIs running together (counted at the model's API:
// each CLI is in a request while it runs).
func TestCLISlotsBoundTheCLIs(t *testing.T) {
	t.Parallel()
	var now, peak atomic.Int32
	slow := fakeapi.Rule{Respond: func(fakeapi.Request) fakeapi.Reply {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(300 * time.Millisecond)
		now.Add(-1)
		return fakeapi.Reply{Text: "Done."}
	}}
	h := newHarness(t, nil, runner.Policy{}, runner.Limits{}, slow)
	r, err := runner.New(runner.Config{
		Store: h.store,
		Resolve: func(store.Run) (runner.Resolved, error) {
			return runner.Resolved{Agent: h.agent}, nil
		},
		CLISlots: make(chan struct{}, 1),
		Sleep:    func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 3 {
		run, err := r.Create(ctx, runner.NewRun{Prompt: fmt.Sprintf("task %d", i), WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := r.Drive(ctx, run.ID); err != nil || got.Status != store.RunDone {
				t.Errorf("run %s: %s %q, %v", run.ID, got.Status, got.Error, err)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Errorf("%d agent CLIs ran at once, want at most 1", p)
	}
}
