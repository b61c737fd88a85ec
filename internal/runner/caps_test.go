package runner_test

import (
	"context"
	"log/slog"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
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

// budgetAgent records the --max-budget-usd of every turn it starts.
type budgetAgent struct {
	runner.Agent
	mu      sync.Mutex
	budgets []float64
}

func (a *budgetAgent) Start(ctx context.Context, req executor.Request) (*executor.Process, error) {
	a.mu.Lock()
	a.budgets = append(a.budgets, req.MaxBudgetUSD)
	a.mu.Unlock()
	return a.Agent.Start(ctx, req)
}

func (a *budgetAgent) started() []float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]float64(nil), a.budgets...)
}

// capHarness is a runner with spend caps over the real CLI and the fake
// API, its turns' budgets recorded, its one surface a person.
type capHarness struct {
	// waited is closed when a run first waits for turns still running
	// that reserved what was left of a cap (its log line).
	waited     chan struct{}
	waitedOnce sync.Once
	st         *store.Store
	r          *runner.Runner
	agent      *budgetAgent
	person     *person
	fake       *fakeapi.Server
	// pol is the runs' policy; set it before driving.
	pol runner.Policy
}

func newCapHarness(t *testing.T, caps runner.Caps, rs ...fakeapi.Rule) *capHarness {
	t.Helper()
	f := fakeapi.New(rs...)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ex, err := executor.New(executor.Config{Command: clitest.Claude(t), Env: clitest.Env(t, ts.URL), AppendSystemPrompt: questions.ProtocolPrompt(), Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h := &capHarness{st: st, agent: &budgetAgent{Agent: ex}, person: newPerson("test"), fake: f, waited: make(chan struct{})}
	h.r, err = runner.New(runner.Config{
		Store: st,
		Resolve: func(store.Run) (runner.Resolved, error) {
			return runner.Resolved{Agent: h.agent, Surfaces: []surfaces.Surface{h.person}, Policy: h.pol}, nil
		},
		Caps:   caps,
		Logger: slog.New(slog.NewTextHandler(waitWriter{testWriter{t}, h}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// drive creates a run and drives it in the background: its ID, and its
// run once the drive returned.
func (h *capHarness) drive(t *testing.T) (string, <-chan store.Run) {
	t.Helper()
	ctx := context.Background()
	run, err := h.r.Create(ctx, runner.NewRun{Prompt: "Do it", WorkDir: t.TempDir(), Surfaces: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan store.Run, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		got, err := h.r.Drive(dctx, run.ID)
		if err != nil {
			t.Errorf("drive: %v", err)
		}
		out <- got
	}()
	return run.ID, out
}

// capQuestion waits for run id's pending cap question.
func (h *capHarness) capQuestion(t *testing.T, id string) store.SetRecord {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sets, err := h.st.OpenSets(context.Background(), id)
		if err == nil && len(sets) == 1 && sets[0].Set.Kind == questions.KindCap {
			return sets[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cap question: %+v, %v", sets, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGlobalDayCapBudgetsAndAsks: under limits.cost_usd_per_day, a turn
// gets --max-budget-usd for what is left of the day; past the cap no agent
// starts: the run asks on its surface, and Continue raises the day's cap
// once, by its amount, before the turn starts with what is left of it.
func TestGlobalDayCapBudgetsAndAsks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newCapHarness(t, runner.Caps{DayUSD: 0.002, Location: time.UTC}, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Done."}}) // $0.0008 a call
	st, agent, p, f := h.st, h.agent, h.person, h.fake
	// What another run spent today: $0.0015 of the $0.002.
	if _, err := st.CreateRun(ctx, store.Run{ID: "earlier", Prompt: "p", Status: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	tn, err := st.BeginTurn(ctx, store.Turn{RunID: "earlier", Kind: store.TurnStart, Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FinishTurn(ctx, "earlier", tn.Seq, store.TurnResult{Status: executor.StatusSuccess, CostUSD: 0.0015}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// $0.0005 left: the turn gets it; its one call crosses the cap after
	// the model ended its turn, so the run is done.
	_, ended := h.drive(t)
	if run := <-ended; run.Status != store.RunDone || run.FinalText != "Done." {
		t.Fatalf("first run %s %q %q; want done", run.Status, run.FinalText, run.Error)
	}
	if b := agent.started(); len(b) != 1 || math.Abs(b[0]-0.0005) > 1e-9 {
		t.Fatalf("budgets given: %v; want what is left of the day's cap, $0.0005", b)
	}

	// $0.0023 spent of $0.002: no agent starts, the run asks.
	id, ended := h.drive(t)
	rec := h.capQuestion(t, id)
	q := rec.Set.Questions[0]
	if rec.Set.Kind != questions.KindCap || q.Header != "Spend cap" ||
		q.Text != "all runs have spent $0.0023 of their $0.0020 today (limits.cost_usd_per_day): continue?" {
		t.Fatalf("cap question %s %q %q", rec.Set.Kind, q.Header, q.Text)
	}
	if b := agent.started(); len(b) != 1 {
		t.Fatalf("an agent started past the cap: budgets %v", b)
	}
	p.answers <- []questions.Answer{{QuestionID: q.ID, Labels: []string{"Continue"}}}
	if run := <-ended; run.Status != store.RunDone {
		t.Fatalf("second run %s %q; want done after Continue", run.Status, run.Error)
	}
	if b := agent.started(); len(b) != 2 || math.Abs(b[1]-0.0017) > 1e-9 {
		t.Fatalf("budgets given: %v; want $0.0017 (the cap raised to $0.004, $0.0023 spent)", b)
	}
	day, _ := runner.PeriodOf("day", time.Now(), time.UTC)
	if raised, n, err := st.CapRaises(ctx, store.CapScopeAll, "day", day); err != nil || n != 1 || raised != 0.002 {
		t.Fatalf("raises of the day's cap: $%v × %d (%v); want $0.002 once", raised, n, err)
	}
	if got, _ := st.QuestionSet(ctx, rec.Set.ID); got.State != store.SetResumed {
		t.Fatalf("the cap question is %s; want consumed (resumed)", got.State)
	}
	for _, req := range f.Requests() {
		if strings.Contains(req.LastUserText, "Spend cap") || strings.Contains(req.LastUserText, rec.Set.ID) {
			t.Fatalf("the cap question's answer reached the model: %q", req.LastUserText)
		}
	}
}

// TestTurnCutShortAtACapAsksThenGoesOn: a turn the model had not ended
// (it calls a tool on every reply) stops at what was left of the cap; the
// run then asks before its next turn, and Continue resumes the session with
// what is left of the raised cap.
func TestTurnCutShortAtACapAsksThenGoesOn(t *testing.T) {
	t.Parallel()
	h := newCapHarness(t, runner.Caps{DayUSD: 0.001},
		fakeapi.Rule{When: "a person chose to continue", Reply: fakeapi.Reply{Text: "Finished after the cap was raised."}},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}})
	id, ended := h.drive(t)
	rec := h.capQuestion(t, id)
	turns, err := h.st.Turns(context.Background(), id)
	if err != nil || len(turns) != 1 || turns[0].Result.Category != runner.CategorySpendCap {
		t.Fatalf("turns = %+v, %v; want one cut short at the cap", turns, err)
	}
	if q := rec.Set.Questions[0].Text; q != "all runs have spent $0.0016 of their $0.0010 today (limits.cost_usd_per_day): continue?" {
		t.Fatalf("cap question %q", q)
	}
	h.person.answers <- []questions.Answer{{QuestionID: rec.Set.Questions[0].ID, Labels: []string{"Continue"}}}
	run := <-ended
	if run.Status != store.RunDone || run.FinalText != "Finished after the cap was raised." {
		t.Fatalf("run %s %q %q; want done", run.Status, run.FinalText, run.Error)
	}
	if b := h.agent.started(); len(b) != 2 || math.Abs(b[0]-0.001) > 1e-9 || math.Abs(b[1]-0.0004) > 1e-9 {
		t.Fatalf("budgets given: %v; want $0.001, then $0.0004 (the cap raised to $0.002, $0.0016 spent)", b)
	}
}

// TestCapQuestionNobodyAnswersStops: a spec's daily cap reached, nobody
// answering its question within question_timeout stops the run, whatever
// on_timeout says (spending more is not the model's to decide).
func TestCapQuestionNobodyAnswersStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newCapHarness(t, runner.Caps{}, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Done."}})
	h.pol = runner.Policy{MaxCostUSDPerDay: 0.001, QuestionTimeout: time.Second, OnTimeout: runner.OnTimeout{Action: "decide"}}
	if _, err := h.st.CreateRun(ctx, store.Run{ID: "earlier", Spec: "nightly", Prompt: "p", Status: store.RunRunning}); err != nil {
		t.Fatal(err)
	}
	tn, err := h.st.BeginTurn(ctx, store.Turn{RunID: "earlier", Kind: store.TurnStart, Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.FinishTurn(ctx, "earlier", tn.Seq, store.TurnResult{Status: executor.StatusSuccess, CostUSD: 0.001}, nil, nil); err != nil {
		t.Fatal(err)
	}
	run, err := h.r.Create(ctx, runner.NewRun{Spec: "nightly", Prompt: "Do it", WorkDir: t.TempDir(), Surfaces: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	got, err := h.r.Drive(dctx, run.ID)
	if err != nil || got.Status != store.RunStopped || !strings.Contains(got.Error, "Stop") {
		t.Fatalf("run %s %q, %v; want stopped by nobody's answer", got.Status, got.Error, err)
	}
	if b := h.agent.started(); len(b) != 0 || len(h.fake.Requests()) != 0 {
		t.Fatalf("an agent started past the cap: budgets %v, %d calls", b, len(h.fake.Requests()))
	}
}

// TestPeriodOfInTimezone: a day and a month begin at midnight where the
// caps are kept (limits.timezone), not in UTC.
func TestPeriodOfInTimezone(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	at := time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC) // 00:30 on 1 December in Berlin
	start, end := runner.PeriodOf("day", at, berlin)
	if want := time.Date(2026, 12, 1, 0, 0, 0, 0, berlin); !start.Equal(want) || !end.Equal(want.AddDate(0, 0, 1)) {
		t.Errorf("day = %s – %s; want from %s", start, end, want)
	}
	start, end = runner.PeriodOf("month", at, berlin)
	if want := time.Date(2026, 12, 1, 0, 0, 0, 0, berlin); !start.Equal(want) || !end.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, berlin)) {
		t.Errorf("month = %s – %s; want December in Berlin", start, end)
	}
	if start, _ := runner.PeriodOf("day", at, time.UTC); !start.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("UTC day starts %s", start)
	}
}

// waitWriter logs for a test and closes its harness's waited at the line
// of a run that waits for turns holding what was left of a cap.
type waitWriter struct {
	testWriter
	h *capHarness
}

func (w waitWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "reserved by turns still running; the run waits") {
		w.h.waitedOnce.Do(func() { close(w.h.waited) })
	}
	return w.testWriter.Write(p)
}
