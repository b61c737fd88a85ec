package slack

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// groupAnswers is surfacetest's Answers that also answers groups: each
// set is decided by its Offer, the others' answers mapped by position.
type groupAnswers struct {
	*surfacetest.Answers
	sets  map[string]questions.Set
	group map[string][]questions.GroupRun

	mu     sync.Mutex
	others []string // what the last OfferGroup was given
}

var _ surfaces.GroupAnswers = (*groupAnswers)(nil)

func (g *groupAnswers) Group(_ context.Context, setID string, _ int) ([]questions.GroupRun, error) {
	return g.group[setID], nil
}

func (g *groupAnswers) OfferGroup(ctx context.Context, resp questions.Response, others []string) (questions.GroupDecision, error) {
	g.mu.Lock()
	g.others = others
	g.mu.Unlock()
	d, err := g.Offer(ctx, resp)
	if err != nil {
		return questions.GroupDecision{}, err
	}
	out := questions.GroupDecision{ID: "g0123456789a", Sets: []questions.GroupOutcome{{GroupRun: questions.GroupRun{SetID: resp.SetID}, Decision: d}}}
	for _, id := range others {
		d, err := g.Offer(ctx, questions.ForSet(g.sets[resp.SetID], g.sets[id], resp))
		if err != nil {
			return questions.GroupDecision{}, err
		}
		out.Sets = append(out.Sets, questions.GroupOutcome{GroupRun: questions.GroupRun{SetID: id, RunID: g.sets[id].RunID}, Decision: d})
	}
	return out, nil
}

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
	ga := &groupAnswers{Answers: surfacetest.NewAnswers(), sets: map[string]questions.Set{a.ID: a, b.ID: b, c.ID: c},
		group: map[string][]questions.GroupRun{
			a.ID: {{SetID: b.ID, RunID: b.RunID, Spec: "nightly-b"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
			b.ID: {{SetID: a.ID, RunID: a.RunID, Spec: "nightly-a"}, {SetID: c.ID, RunID: c.RunID, Spec: "nightly-c"}},
		}}
	for _, set := range []questions.Set{a, b, c} {
		ga.Add(set)
	}
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
	ga.mu.Lock()
	others := ga.others
	ga.mu.Unlock()
	if !slices.Equal(others, []string{b.ID}) {
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
