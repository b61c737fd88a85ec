package surfacetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Answers is a surfaces.Answers held in memory, deciding as the runner's
// store does: a valid answer to a pending set is taken (first valid answer
// to each question wins), an invalid one is refused with the reason, any
// answer to a closed set is too late. Sets are known once added or first
// offered. Safe for concurrent use.
type Answers struct {
	mu      sync.Mutex
	sets    map[string]*memSet
	changed chan struct{} // closed and replaced on every change
}

type memSet struct {
	set    questions.Set // zero until Add
	got    map[string]questions.Answer
	by     []string
	srf    []string
	at     time.Time
	final  *questions.Response
	closed bool
	refuse []error // refusals for the next offers, in order
	offers []Offered
	// onFinal are called, once, when the set gets its complete answer.
	onFinal []func()
}

// Offered is one call of Offer and what was decided.
type Offered struct {
	Response questions.Response
	Decision surfaces.Decision
}

var _ surfaces.Answers = (*Answers)(nil)

// NewAnswers returns an empty Answers.
func NewAnswers() *Answers {
	return &Answers{sets: map[string]*memSet{}, changed: make(chan struct{})}
}

func (a *Answers) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *Answers) get(id string) *memSet {
	s := a.sets[id]
	if s == nil {
		s = &memSet{got: map[string]questions.Answer{}}
		a.sets[id] = s
	}
	return s
}

// Add makes set pending.
func (a *Answers) Add(set questions.Set) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.get(set.ID).set = set
}

// Refuse makes the next Offer of an answer to setID refused with reason.
func (a *Answers) Refuse(setID string, reason error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.get(setID)
	s.refuse = append(s.refuse, reason)
}

// Close closes setID: answered elsewhere with final, or expired when final
// is nil.
func (a *Answers) Close(setID string, final *questions.Response) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.get(setID)
	var fns []func()
	if !s.closed {
		s.closed, s.final = true, final
		if final != nil {
			fns, s.onFinal = s.onFinal, nil
		}
		a.notify()
	}
	a.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	a.mu.Lock()
}

// Offers returns the offers made for setID so far, with their decisions.
func (a *Answers) Offers(setID string) []Offered {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Offered(nil), a.get(setID).offers...)
}

// Final returns setID's complete answer, if it has one.
func (a *Answers) Final(setID string) (questions.Response, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.get(setID).final; f != nil {
		return *f, true
	}
	return questions.Response{}, false
}

// Wait waits until cond, called under the lock after every change, is true
// or ctx ends.
func (a *Answers) Wait(ctx context.Context, cond func(a *Answers) bool) error {
	for {
		a.mu.Lock()
		ch := a.changed
		a.mu.Unlock()
		if cond(a) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// WaitFinal waits for setID's complete answer.
func (a *Answers) WaitFinal(ctx context.Context, setID string) (questions.Response, error) {
	var resp questions.Response
	err := a.Wait(ctx, func(a *Answers) bool {
		var ok bool
		resp, ok = a.Final(setID)
		return ok
	})
	return resp, err
}

// WaitOffers waits until setID had at least n offers.
func (a *Answers) WaitOffers(ctx context.Context, setID string, n int) ([]Offered, error) {
	var got []Offered
	err := a.Wait(ctx, func(a *Answers) bool {
		got = a.Offers(setID)
		return len(got) >= n
	})
	return got, err
}

// OnFinal has fn called once setID gets its complete answer, before the
// Offer that completed it returns: as the runner, which ends the Asks of a
// set (cancels their context) as soon as the store has its answer, while
// the surface that offered it still has to show it taken. fn is called at
// once when setID has its answer already.
func (a *Answers) OnFinal(setID string, fn func()) {
	a.mu.Lock()
	s := a.get(setID)
	if s.final == nil {
		s.onFinal = append(s.onFinal, fn)
		fn = nil
	}
	a.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Offer implements surfaces.Answers.
func (a *Answers) Offer(ctx context.Context, resp questions.Response) (surfaces.Decision, error) {
	if err := ctx.Err(); err != nil {
		return surfaces.Decision{}, err
	}
	a.mu.Lock()
	s := a.get(resp.SetID)
	d := a.decide(s, resp)
	s.offers = append(s.offers, Offered{Response: resp, Decision: d})
	var fns []func()
	if s.final != nil {
		fns, s.onFinal = s.onFinal, nil
	}
	a.notify()
	a.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return d, nil
}

func (a *Answers) decide(s *memSet, resp questions.Response) surfaces.Decision {
	if s.closed {
		return surfaces.Decision{Closed: true, Final: s.final}
	}
	if s.set.ID == "" {
		return surfaces.Decision{Invalid: fmt.Errorf("no question set %q is waiting", resp.SetID)}
	}
	if len(s.refuse) > 0 {
		err := s.refuse[0]
		s.refuse = s.refuse[1:]
		return surfaces.Decision{Invalid: err, Pending: s.pending()}
	}
	if err := questions.CheckPartial(s.set, resp); err != nil {
		return surfaces.Decision{Invalid: err, Pending: s.pending()}
	}
	if resp.By == "" || resp.Surface == "" {
		return surfaces.Decision{Invalid: fmt.Errorf("answer to set %s does not say who gave it where", resp.SetID), Pending: s.pending()}
	}
	for _, ans := range resp.Answers {
		if _, ok := s.got[ans.QuestionID]; !ok {
			s.got[ans.QuestionID] = ans
		}
	}
	s.by = appendNew(s.by, resp.By)
	s.srf = appendNew(s.srf, resp.Surface)
	s.at = resp.At
	if s.at.IsZero() {
		s.at = time.Now()
	}
	d := surfaces.Decision{Taken: true, Pending: s.pending()}
	if len(d.Pending) == 0 {
		final := questions.Response{SetID: s.set.ID, At: s.at}
		for _, q := range s.set.Questions {
			final.Answers = append(final.Answers, s.got[q.ID])
		}
		final.By, final.Surface = join(s.by), join(s.srf)
		s.final, s.closed = &final, true
		d.Final, d.Closed = &final, true
	}
	return d
}

func (s *memSet) pending() []string {
	var out []string
	for _, q := range s.set.Questions {
		if _, ok := s.got[q.ID]; !ok {
			out = append(out, q.ID)
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func join(list []string) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}
