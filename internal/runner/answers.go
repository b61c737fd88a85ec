package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// settled reports a set the store says is no longer pending: its answer (an
// event) and, on every surface it was asked on but the one that took the
// answer (which showed it already), who answered.
func (r *Runner) settled(ctx context.Context, run store.Run, rec store.SetRecord, surfs []surfaces.Surface) error {
	if rec.State == store.SetPending || rec.State == store.SetExpired {
		return nil // the loop looks again: some questions still open, or the run ended
	}
	ctx = context.WithoutCancel(ctx)
	final := rec.Response
	r.emit(Event{Kind: EventAnswer, RunID: run.ID, Set: &rec.Set, Response: &final})
	for _, s := range surfs {
		if s.Name() == final.Surface {
			continue
		}
		if res, ok := s.(surfaces.Resolver); ok {
			if err := res.Resolve(ctx, rec.Set, final); err != nil {
				r.log.Warn("show answer on surface", "surface", s.Name(), "set", rec.Set.ID, "err", err)
			}
		}
	}
	return nil
}

// record stores resp, an answer the run gives itself (a timeout's), and
// reports the set settled.
func (r *Runner) record(ctx context.Context, run store.Run, resp questions.Response, surfs []surfaces.Surface) error {
	rec, err := r.cfg.Store.RecordAnswer(context.WithoutCancel(ctx), resp)
	if err != nil && !errors.Is(err, store.ErrAlreadyAnswered) {
		return err
	}
	return r.settled(ctx, run, rec, surfs)
}

// storeAnswers is the surfaces.Answers of a run's question sets (of any
// run's when runID is empty): the store decides (store.OfferFor), in one
// transaction, and the first valid answer wins. Every surface hands its
// answers to it.
type storeAnswers struct {
	st        *store.Store
	runID     string
	failpoint func(string)
}

// answers is the surfaces.Answers of run runID's sets.
func (r *Runner) answers(runID string) *storeAnswers {
	return &storeAnswers{st: r.cfg.Store, runID: runID, failpoint: r.cfg.Failpoint}
}

var _ surfaces.Answers = (*storeAnswers)(nil)

// Offer implements surfaces.Answers.
func (a *storeAnswers) Offer(ctx context.Context, resp questions.Response) (surfaces.Decision, error) {
	d, err := a.st.OfferFor(ctx, a.runID, resp)
	if err == nil && d.Taken {
		a.failpoint("answer-stored")
	}
	return d, err
}

var _ surfaces.GroupAnswers = (*storeAnswers)(nil)

// Group implements surfaces.GroupAnswers.
func (a *storeAnswers) Group(ctx context.Context, setID string, max int) ([]questions.GroupRun, error) {
	return a.st.Group(ctx, setID, max)
}

// OfferGroup implements surfaces.GroupAnswers.
func (a *storeAnswers) OfferGroup(ctx context.Context, resp questions.Response, others []string) (questions.GroupDecision, error) {
	g, err := a.st.AnswerGroupFor(ctx, a.runID, resp, others)
	if err == nil && g.Taken() > 0 {
		a.failpoint("answer-stored")
	}
	return g, err
}

// notifyResumed tells the surfaces of set that its answer reached the model
// (GitHub's 🚀). Best effort; set is nil when the turn hands no set over.
func (r *Runner) notifyResumed(ctx context.Context, d *drive, set *questions.Set) {
	if set == nil {
		return
	}
	for _, s := range d.Surfaces {
		if n, ok := s.(surfaces.ResumeNotifier); ok {
			if err := n.Resumed(ctx, *set); err != nil {
				r.log.Warn("mark resumed on surface", "surface", s.Name(), "set", set.ID, "err", err)
			}
		}
	}
}

var _ surfaces.Rememberer = (*storeAnswers)(nil)

// Remember implements surfaces.Rememberer: on a surface only spec rules
// are made, for a set of the run (surfaces/remember.go says why).
func (a *storeAnswers) Remember(ctx context.Context, req surfaces.RememberRequest) (surfaces.Remembered, error) {
	return RememberOnSurface(ctx, a.st, a.runID, req)
}

// RememberOnSurface keeps the answer to a set of run runID (any run's when
// runID is empty) as a spec rule, for a surface (surfaces.Rememberer).
func RememberOnSurface(ctx context.Context, st *store.Store, runID string, req surfaces.RememberRequest) (surfaces.Remembered, error) {
	return rememberOnSurface(ctx, st, runID, req, nil)
}

// rememberOnSurface is RememberOnSurface, taking the offer to remember
// offer in the rule's transaction when it is not nil.
func rememberOnSurface(ctx context.Context, st *store.Store, runID string, req surfaces.RememberRequest, offer *store.OfferRef) (surfaces.Remembered, error) {
	scope, life, err := store.ParseRemember(req.Remember)
	if err != nil {
		return surfaces.Remembered{}, err
	}
	if scope != store.ScopeSpec {
		return surfaces.Remembered{}, fmt.Errorf("only a spec rule is kept from %s (--remember spec:7d); a %s rule is made with `orchestrator answer --remember` or the web inbox", req.Surface, scope)
	}
	if runID != "" {
		rec, err := st.QuestionSet(ctx, req.SetID)
		if err != nil {
			return surfaces.Remembered{}, err
		}
		if rec.Set.RunID != runID {
			return surfaces.Remembered{}, fmt.Errorf("question set %s is not one of run %s", req.SetID, runID)
		}
	}
	rule, err := st.Remember(ctx, store.RuleRequest{SetID: req.SetID, Scope: scope, Lifetime: life, By: req.By, Surface: req.Surface, Pattern: req.Pattern, Offer: offer})
	if err != nil {
		return surfaces.Remembered{}, err
	}
	return surfaces.Remembered{RuleID: rule.ID, Text: fmt.Sprintf("kept as rule %s for %s until %s (`orchestrator rules revoke %s` ends it)",
		rule.ID, rule.ScopeText(), rule.ExpiresAt.UTC().Format("2006-01-02"), rule.ID)}, nil
}
