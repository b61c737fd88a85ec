package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Policy is how a run treats its questions (a spec's settings).
type Policy struct {
	// Presets answer questions at once, without asking anyone.
	Presets []Preset
	// QuestionTimeout, when set, ends the wait for an answer: OnTimeout
	// says what happens then.
	QuestionTimeout time.Duration
	// RemindEvery, when set, sends a reminder on the surfaces that can.
	RemindEvery time.Duration
	// EscalateTo, when set, is asked as well once a reminder went
	// unanswered for another RemindEvery.
	EscalateTo surfaces.Surface
	OnTimeout  OnTimeout
}

// Preset is an answer given in advance: Match is a question's header or
// text (case-insensitive), Answer what a person would have typed.
type Preset struct {
	Match  string
	Answer string
}

// OnTimeout says what a question timeout does: "fail" the run (default),
// answer with the "default" Option, or "skip" (tell the model nobody
// answered and let it decide).
type OnTimeout struct {
	Action string
	Option string
}

// presetResponse answers the questions of set that a preset matches.
func presetResponse(set questions.Set, presets []Preset, now time.Time) questions.Response {
	resp := questions.Response{SetID: set.ID, By: "the spec's preset answers", Surface: "spec", At: now}
	for _, q := range set.Questions {
		for _, p := range presets {
			m := strings.TrimSpace(p.Match)
			if m == "" || !(strings.EqualFold(m, strings.TrimSpace(q.Header)) || strings.EqualFold(m, strings.TrimSpace(q.Text))) {
				continue
			}
			if a, err := questions.ParseQuestionAnswer(q, p.Answer); err == nil {
				resp.Answers = append(resp.Answers, a)
				break
			}
		}
	}
	return resp
}

// unanswered is set less the questions already answered in resp.
func unanswered(set questions.Set, resp questions.Response) questions.Set {
	out := set
	out.Questions = nil
	for _, q := range set.Questions {
		if _, ok := resp.Answer(q.ID); !ok {
			out.Questions = append(out.Questions, q)
		}
	}
	return out
}

type askResult struct {
	resp questions.Response
	err  error
}

// wait asks a pending set on the run's surfaces and waits for its answer,
// which may also come from another process (`orchestrator answer`), a
// preset, or the timeout policy. It returns once the set is answered (the
// loop then resumes the session), or why it stopped waiting.
func (r *Runner) wait(ctx context.Context, run store.Run, rec store.SetRecord) error {
	st := r.cfg.Store
	pol := r.cfg.Policy(run)
	if len(pol.Presets) > 0 {
		if resp := presetResponse(unanswered(rec.Set, rec.Response), pol.Presets, r.cfg.Now()); len(resp.Answers) > 0 {
			got, err := st.RecordAnswer(ctx, resp)
			if err != nil && !errors.Is(err, store.ErrAlreadyAnswered) {
				return err
			}
			r.emit(Event{Kind: EventAnswer, RunID: run.ID, Set: &rec.Set, Response: &resp})
			if got.State != store.SetPending {
				return nil
			}
			rec = got
		}
	}
	surfs, err := r.cfg.Surfaces(run)
	if err != nil {
		return r.fail(ctx, run, fmt.Sprintf("surfaces: %v", err))
	}
	if pol.EscalateTo != nil && !rec.EscalatedAt.IsZero() {
		surfs = append(surfs, pol.EscalateTo)
	}
	ask := unanswered(rec.Set, rec.Response)
	r.emit(Event{Kind: EventQuestion, RunID: run.ID, Set: &ask, Surfaces: names(surfs)})
	gone := false // every surface said it cannot take an answer any more
	for {
		actx, cancel := context.WithCancel(ctx)
		asked := make(chan askResult, 1)
		if len(surfs) > 0 && !gone {
			go func() {
				resp, err := surfaces.Ask(actx, r.log, ask, surfs...)
				asked <- askResult{resp, err}
			}()
		} else {
			asked = nil // nobody to ask here: only another process can answer
		}
		stored := make(chan askResult, 1)
		go func() {
			rec, err := st.WaitSet(actx, rec.Set.ID)
			stored <- askResult{rec.Response, err}
		}()
		timer, what := r.nextPolicyEvent(pol, rec)
		// stop ends this round of asking. An answer a surface returned
		// while being stopped is not dropped: it is returned.
		stop := func() *questions.Response {
			cancel()
			var late *questions.Response
			if asked != nil {
				if a := <-asked; a.err == nil {
					late = &a.resp
				}
			}
			<-stored
			if timer != nil {
				timer.Stop()
			}
			return late
		}
		var tick <-chan time.Time
		if timer != nil {
			tick = timer.C
		}
		select {
		case a := <-asked:
			asked = nil
			if a.err == nil {
				stop()
				return r.answered(ctx, run, rec.Set, surfs, &a.resp)
			}
			stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(a.err, surfaces.ErrUnavailable) {
				r.log.Info("no surface can take an answer now; the question stays pending", "run", run.ID, "set", rec.Set.ID)
				if r.cfg.KeepWaiting {
					gone = true // an answer can still come from another process
					continue
				}
				return fmt.Errorf("question set %s: %w", rec.Set.ID, ErrWaiting)
			}
			return fmt.Errorf("ask question set %s: %w", rec.Set.ID, a.err)
		case s := <-stored:
			stored <- s // stop() reads it again
			late := stop()
			if s.err != nil {
				return s.err
			}
			// Answered by another process; a late answer here loses
			// (RecordAnswer keeps the first).
			return r.answered(ctx, run, rec.Set, surfs, late)
		case <-tick:
			if late := stop(); late != nil {
				return r.answered(ctx, run, rec.Set, surfs, late)
			}
			done, err := r.policyEvent(ctx, run, &rec, &surfs, pol, what)
			if done || err != nil {
				return err
			}
			if what == policyEscalate {
				gone = false // a new surface to ask
			}
		}
	}
}

func names(ss []surfaces.Surface) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name()
	}
	return out
}

// answered stores resp (when it came from a surface of this process; nil
// when the store already has the answer) and shows every surface who won.
func (r *Runner) answered(ctx context.Context, run store.Run, set questions.Set, surfs []surfaces.Surface, resp *questions.Response) error {
	ctx = context.WithoutCancel(ctx)
	st := r.cfg.Store
	var rec store.SetRecord
	var err error
	if resp != nil {
		rec, err = st.RecordAnswer(ctx, *resp)
		if err != nil && !errors.Is(err, store.ErrAlreadyAnswered) {
			return err
		}
		r.cfg.Failpoint("answer-stored")
	} else {
		rec, err = st.QuestionSet(ctx, set.ID)
		if err != nil {
			return err
		}
	}
	if rec.State == store.SetPending {
		return nil // some questions still open: the loop asks the rest
	}
	if rec.State == store.SetExpired {
		return nil
	}
	final := rec.Response
	r.emit(Event{Kind: EventAnswer, RunID: run.ID, Set: &rec.Set, Response: &final})
	for _, s := range surfs {
		if res, ok := s.(surfaces.Resolver); ok {
			if err := res.Resolve(ctx, rec.Set, final); err != nil {
				r.log.Warn("show answer on surface", "surface", s.Name(), "set", set.ID, "err", err)
			}
		}
	}
	return nil
}

// notifyResumed tells the surfaces of a set that its answer reached the
// model (GitHub's 🚀). Best effort.
func (r *Runner) notifyResumed(ctx context.Context, run store.Run, setID string) {
	rec, err := r.cfg.Store.QuestionSet(ctx, setID)
	if err != nil {
		return
	}
	surfs, err := r.cfg.Surfaces(run)
	if err != nil {
		return
	}
	for _, s := range surfs {
		if n, ok := s.(surfaces.ResumeNotifier); ok {
			if err := n.Resumed(ctx, rec.Set); err != nil {
				r.log.Warn("mark resumed on surface", "surface", s.Name(), "set", setID, "err", err)
			}
		}
	}
}

type policyWhat int

const (
	policyRemind policyWhat = iota + 1
	policyEscalate
	policyTimeout
)

// nextPolicyEvent computes, from the stored times (so restarts keep the
// schedule), when the next reminder, escalation or timeout is due.
func (r *Runner) nextPolicyEvent(pol Policy, rec store.SetRecord) (*time.Timer, policyWhat) {
	var at time.Time
	var what policyWhat
	consider := func(t time.Time, w policyWhat) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at, what = t, w
		}
	}
	if pol.QuestionTimeout > 0 {
		consider(rec.CreatedAt.Add(pol.QuestionTimeout), policyTimeout)
	}
	if pol.RemindEvery > 0 {
		last := rec.CreatedAt
		if rec.RemindedAt.After(last) {
			last = rec.RemindedAt
		}
		if pol.EscalateTo != nil && rec.EscalatedAt.IsZero() && !rec.RemindedAt.IsZero() {
			consider(rec.RemindedAt.Add(pol.RemindEvery), policyEscalate)
		} else {
			consider(last.Add(pol.RemindEvery), policyRemind)
		}
	}
	if what == 0 {
		return nil, 0
	}
	d := at.Sub(r.cfg.Now())
	if d < 0 {
		d = 0
	}
	return time.NewTimer(d), what
}

// policyEvent carries out a reminder, an escalation or a timeout. done is
// true when the wait is over.
func (r *Runner) policyEvent(ctx context.Context, run store.Run, rec *store.SetRecord, surfs *[]surfaces.Surface, pol Policy, what policyWhat) (done bool, err error) {
	st := r.cfg.Store
	now := r.cfg.Now()
	switch what {
	case policyRemind:
		for _, s := range *surfs {
			if rm, ok := s.(surfaces.Reminder); ok {
				if err := rm.Remind(ctx, rec.Set); err != nil {
					r.log.Warn("remind", "surface", s.Name(), "set", rec.Set.ID, "err", err)
				}
			}
		}
		rec.RemindedAt = now
		r.emit(Event{Kind: EventReminder, RunID: run.ID, Set: &rec.Set, Surfaces: names(*surfs)})
		return false, st.MarkReminded(ctx, rec.Set.ID, now)
	case policyEscalate:
		*surfs = append(*surfs, pol.EscalateTo)
		rec.EscalatedAt = now
		r.emit(Event{Kind: EventEscalated, RunID: run.ID, Set: &rec.Set, Surfaces: []string{pol.EscalateTo.Name()}})
		if err := st.MarkEscalated(ctx, rec.Set.ID, now); err != nil {
			return false, err
		}
		return false, st.SetSurfaces(ctx, rec.Set.ID, names(*surfs))
	case policyTimeout:
		return true, r.timeout(ctx, run, *rec, *surfs, pol)
	}
	return false, nil
}

func (r *Runner) timeout(ctx context.Context, run store.Run, rec store.SetRecord, surfs []surfaces.Surface, pol Policy) error {
	open := unanswered(rec.Set, rec.Response)
	ids := make([]string, 0, len(open.Questions))
	for _, q := range open.Questions {
		ids = append(ids, q.ID)
	}
	switch pol.OnTimeout.Action {
	case "default", "skip":
		resp := questions.Response{SetID: rec.Set.ID, By: fmt.Sprintf("nobody (no answer within %s; on_timeout: %s)", pol.QuestionTimeout, pol.OnTimeout.Action),
			Surface: "timeout", At: r.cfg.Now()}
		for _, q := range open.Questions {
			var a questions.Answer
			var err error
			if pol.OnTimeout.Action == "default" {
				a, err = questions.ParseQuestionAnswer(q, pol.OnTimeout.Option)
			}
			if pol.OnTimeout.Action == "skip" || err != nil {
				a = questions.Answer{QuestionID: q.ID, Text: fmt.Sprintf("Nobody answered within %s. Decide yourself, and say what you chose and why.", pol.QuestionTimeout)}
			}
			resp.Answers = append(resp.Answers, a)
		}
		return r.answered(ctx, run, rec.Set, surfs, &resp)
	default:
		return r.fail(ctx, run, fmt.Sprintf("question set %s (%s) got no answer within %s (on_timeout: fail)",
			rec.Set.ID, strings.Join(ids, ", "), pol.QuestionTimeout))
	}
}
