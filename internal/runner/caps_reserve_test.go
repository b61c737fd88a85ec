package runner_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// gateAgent holds the first turn it starts until gate is closed, and
// closes started when that turn is about to start.
type gateAgent struct {
	runner.Agent
	once    sync.Once
	started chan struct{}
	gate    chan struct{}
}

func (a *gateAgent) Start(ctx context.Context, req executor.Request) (*executor.Process, error) {
	first := false
	a.once.Do(func() { first = true })
	if first {
		close(a.started)
		select {
		case <-a.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return a.Agent.Start(ctx, req)
}

// TestTwoRunsAtOnceUnderACapThatFitsOne: a run's turn under a cap that
// fits one turn reserves it as it begins; a second run starting while the
// first one's agent runs finds what is left reserved (it would otherwise
// have been given the same budget, and both could spend it): it starts no
// agent and waits for the first. The first run ends done within its
// budget, having spent the cap: the second asks its cap question then,
// about money spent, and Stop ends it.
func TestTwoRunsAtOnceUnderACapThatFitsOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newCapHarness(t, runner.Caps{DayUSD: 0.0008, Location: time.UTC}, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Done."}}) // $0.0008 a call
	g := &gateAgent{Agent: h.agent.Agent, started: make(chan struct{}), gate: make(chan struct{})}
	h.agent.Agent = g
	first, firstEnded := h.drive(t)
	select {
	case <-g.started:
	case <-time.After(2 * time.Minute):
		t.Fatal("the first run's turn never started")
	}
	turns, err := h.st.Turns(ctx, first)
	if err != nil || len(turns) != 1 || math.Abs(turns[0].ReservedUSD-0.0008) > 1e-9 {
		t.Fatalf("first run's turns %+v, %v; want one that reserved the cap's $0.0008", turns, err)
	}
	second, secondEnded := h.drive(t)
	select {
	case <-h.waited:
	case <-time.After(2 * time.Minute):
		t.Fatal("the second run never waited for the first one's reservation")
	}
	if sets, err := h.st.OpenSets(ctx, second); err != nil || len(sets) != 0 {
		t.Fatalf("second run's open sets %+v, %v while the first one's turn runs; want none (it waits)", sets, err)
	}
	close(g.gate)
	if run := <-firstEnded; run.Status != store.RunDone || run.FinalText != "Done." {
		t.Fatalf("first run %s %q %q; want done", run.Status, run.FinalText, run.Error)
	}
	rec := h.capQuestion(t, second)
	if q := rec.Set.Questions[0].Text; q != "all runs have spent $0.0008 of their $0.0008 today (limits.cost_usd_per_day): continue?" {
		t.Fatalf("cap question %q", q)
	}
	if c := rec.Set.Context; strings.Contains(c, "reserved") {
		t.Fatalf("cap question's context %q speaks of reservations; the money was spent", c)
	}
	h.person.answers <- []questions.Answer{{QuestionID: rec.Set.Questions[0].ID, Labels: []string{"Stop"}}}
	if run := <-secondEnded; run.Status != store.RunStopped {
		t.Fatalf("second run %s %q; want stopped", run.Status, run.Error)
	}
	if b := h.agent.started(); len(b) != 1 || math.Abs(b[0]-0.0008) > 1e-9 {
		t.Fatalf("budgets given: %v; want one turn with the whole cap, $0.0008", b)
	}
	turns, err = h.st.Turns(ctx, first)
	if err != nil || len(turns) != 1 || turns[0].ReservedUSD != 0 || turns[0].Result.CostUSD <= 0 {
		t.Fatalf("first run's turns %+v, %v; want its cost in place of its reservation", turns, err)
	}
	if turns, _ := h.st.Turns(ctx, second); len(turns) != 0 {
		t.Fatalf("second run's turns %+v; want none", turns)
	}
}
