// Package stored gives surface tests the orchestrator's real store (a
// SQLite file in a test directory) for what a surface keeps across
// restarts: runs of a spec that ask a set, the Answers the runner gives a
// surface for a run, and the offers to remember an answer.
package stored

import (
	"context"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Store is a store in a test's directory.
type Store struct{ *store.Store }

// New opens a store in a new directory of t, closed when t ends.
func New(t testing.TB) *Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Store{st}
}

// Ask makes run runID of spec, whose first turn asks set, and returns set
// as asked (its RunID and Turn are the run's).
func (s *Store) Ask(t testing.TB, runID, spec string, set questions.Set) questions.Set {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRun(ctx, store.Run{ID: runID, Spec: spec, WorkDir: t.TempDir(), Prompt: "do it", Surfaces: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, store.Turn{RunID: runID, Kind: store.TurnStart, Prompt: "do it", SessionID: "sess-" + runID})
	if err != nil {
		t.Fatal(err)
	}
	set.RunID, set.Turn = runID, turn.Seq
	if err := s.FinishTurn(ctx, runID, turn.Seq, store.TurnResult{Status: "success", SessionID: "sess-" + runID}, &set, []string{"test"}); err != nil {
		t.Fatal(err)
	}
	return set
}

// State is where set setID stands.
func (s *Store) State(t testing.TB, setID string) store.SetState {
	t.Helper()
	rec, err := s.QuestionSet(context.Background(), setID)
	if err != nil {
		t.Fatal(err)
	}
	return rec.State
}

// Answers are the Answers of run runID, as the runner gives them to a
// surface: the store decides, and remembers (surfaces.Rememberer).
func (s *Store) Answers(runID string) surfaces.Answers { return answers{st: s.Store, runID: runID} }

// Offers are the store's offers to remember (surfaces.RememberOffers).
func (s *Store) Offers() runner.RememberOffers { return runner.RememberOffers{Store: s.Store} }

// Rules are every rule kept, revoked and expired ones too.
func (s *Store) Rules(t testing.TB) []store.Rule {
	t.Helper()
	rules, err := s.Store.Rules(context.Background(), store.RuleFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

type answers struct {
	st    *store.Store
	runID string
}

func (a answers) Offer(ctx context.Context, resp questions.Response) (surfaces.Decision, error) {
	return a.st.OfferFor(ctx, a.runID, resp)
}

func (a answers) Remember(ctx context.Context, req surfaces.RememberRequest) (surfaces.Remembered, error) {
	return runner.RememberOnSurface(ctx, a.st, a.runID, req)
}
