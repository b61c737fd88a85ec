package surfacetest

import (
	"context"
	"sync"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// GroupAnswers is Answers that also answers groups (the same question in
// several runs, issue 28): each set is decided by its Offer, the others'
// answers mapped by position (questions.ForSet).
type GroupAnswers struct {
	*Answers
	sets  map[string]questions.Set
	group map[string][]questions.GroupRun

	mu     sync.Mutex
	others []string // what the last OfferGroup was given
}

var _ surfaces.GroupAnswers = (*GroupAnswers)(nil)

// NewGroupAnswers returns a GroupAnswers holding sets (added), where group
// names the other runs each set's question waits in.
func NewGroupAnswers(group map[string][]questions.GroupRun, sets ...questions.Set) *GroupAnswers {
	g := &GroupAnswers{Answers: NewAnswers(), sets: map[string]questions.Set{}, group: group}
	for _, set := range sets {
		g.sets[set.ID] = set
		g.Add(set)
	}
	return g
}

// Group implements surfaces.GroupAnswers.
func (g *GroupAnswers) Group(_ context.Context, setID string, _ int) ([]questions.GroupRun, error) {
	return g.group[setID], nil
}

// OfferGroup implements surfaces.GroupAnswers.
func (g *GroupAnswers) OfferGroup(ctx context.Context, resp questions.Response, others []string) (questions.GroupDecision, error) {
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

// Others returns the other sets the last OfferGroup was given.
func (g *GroupAnswers) Others() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.others
}
