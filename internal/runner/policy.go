package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// A run's question policy (a spec's settings): presets, reminders,
// escalation and the timeout, and their timers, kept from the stored times
// so that restarts keep the schedule.

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
	// MaxCostUSD, when set, is what the run may spend before it asks its
	// surfaces whether to go on; each Continue grants as much again (see
	// limit.go). It is passed to the CLI as --max-budget-usd, for what is
	// left.
	MaxCostUSD float64
	// MaxTurns, when set, is passed to the CLI as --max-turns on every
	// turn; a turn that reaches it makes the run ask whether to go on with
	// as many again.
	MaxTurns int
	// MaxCostUSDPerDay, when set, is what the runs of the run's spec may
	// spend together in one day (max_cost_usd_per_day; caps.go).
	MaxCostUSDPerDay float64
}

// Preset is an answer given in advance: Match is a question's header or
// text (case-insensitive), Answer what a person would have typed.
type Preset struct {
	Match  string
	Answer string
}

// OnTimeout says what a question timeout does: "fail" the run (the
// default), answer with the "default" Option, "decide" (the model is told
// nobody answered and decides itself) or "skip" (the model is told nobody
// answered and leaves out what depends on the answer). The texts the model
// gets are TimeoutText's; docs/specs.md "When nobody answers: `on_timeout`"
// quotes them.
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

type policyWhat int

const (
	policyRemind policyWhat = iota + 1
	policyEscalate
	policyTimeout
)

// nextPolicyEvent computes, from the stored times (so restarts keep the
// schedule), when the next reminder, escalation or timeout is due.
func (r *Runner) nextPolicyEvent(pol Policy, rec store.SetRecord) (*time.Timer, policyWhat) {
	at, what := policyAt(pol, rec)
	if what == 0 {
		return nil, 0
	}
	d := at.Sub(r.cfg.Now())
	if d < 0 {
		d = 0
	}
	return time.NewTimer(d), what
}

// duePolicyEvent is the reminder, escalation or timeout already due, if any
// (a run taken up after its question's timeout passed).
func (r *Runner) duePolicyEvent(pol Policy, rec store.SetRecord) (policyWhat, bool) {
	at, what := policyAt(pol, rec)
	return what, what != 0 && !at.After(r.cfg.Now())
}

// policyAt is when the next reminder, escalation or timeout of rec is due.
func policyAt(pol Policy, rec store.SetRecord) (time.Time, policyWhat) {
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
	return at, what
}

// policyEvent carries out a reminder, an escalation or a timeout. done is
// true when the wait is over.
func (r *Runner) policyEvent(ctx context.Context, run store.Run, rec *store.SetRecord, surfs *[]surfaces.Surface, pol Policy, what policyWhat) (done bool, err error) {
	st := r.cfg.Store
	now := r.cfg.Now()
	switch what {
	case policyRemind:
		var reminded []string
		for _, s := range *surfs {
			rm, ok := s.(surfaces.Reminder)
			if !ok {
				continue
			}
			switch err := rm.Remind(ctx, rec.Set); {
			case errors.Is(err, surfaces.ErrNotAsked):
				// Not posted there yet: no reminder before the question.
				r.log.Info("no reminder: the question is not posted yet", "surface", s.Name(), "set", rec.Set.ID)
			case err != nil:
				r.log.Warn("remind", "surface", s.Name(), "set", rec.Set.ID, "err", err)
			default:
				reminded = append(reminded, s.Name())
			}
		}
		// The next reminder is due RemindEvery from now either way.
		rec.RemindedAt = now
		if len(reminded) > 0 {
			r.emit(Event{Kind: EventReminder, RunID: run.ID, Set: &rec.Set, Surfaces: reminded})
		}
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
		r.closeSet(ctx, rec.Set, *surfs, timedOutReason(pol))
		return true, r.timeout(ctx, run, *rec, *surfs, pol)
	}
	return false, nil
}

// markDefault marks, in the options people are shown, the one on_timeout
// default chooses when nobody answers in time: " (chosen if nobody answers
// within 12h0m0s)" after its description.
func markDefault(set *questions.Set, pol Policy) {
	if pol.OnTimeout.Action != "default" || pol.QuestionTimeout <= 0 {
		return
	}
	for i, q := range set.Questions {
		a, err := questions.ParseQuestionAnswer(q, pol.OnTimeout.Option)
		if err != nil || len(a.Labels) == 0 {
			continue
		}
		opts := slices.Clone(q.Options)
		for j, o := range opts {
			if slices.Contains(a.Labels, o.Label) {
				opts[j].Description = strings.TrimSpace(o.Description + fmt.Sprintf(" (chosen if nobody answers within %s)", pol.QuestionTimeout))
			}
		}
		set.Questions[i].Options = opts
	}
}

// TimeoutText is what the model is told, as the answer to a question nobody
// answered within wait, for on_timeout action ("default", "decide" or
// "skip"; "default" when its option is not one of the question's reads as
// "decide"). option is on_timeout's option. The README ("When nobody
// answers") quotes these texts.
func TimeoutText(action, option string, wait time.Duration) string {
	switch action {
	case "default":
		return fmt.Sprintf("Nobody answered within %s, so the spec's default option %q was chosen for them (on_timeout: default). Go on with it, and say in your reply that the default was used.", wait, option)
	case "skip":
		return fmt.Sprintf("Nobody answered within %s (on_timeout: skip). Do not do what depends on this answer: leave it out, go on with the rest of the task, and say in your reply what you left out.", wait)
	}
	return fmt.Sprintf("Nobody answered within %s (on_timeout: decide). Decide yourself, go on with the task, and say in your reply what you decided and why.", wait)
}

func (r *Runner) timeout(ctx context.Context, run store.Run, rec store.SetRecord, surfs []surfaces.Surface, pol Policy) error {
	open := unanswered(rec.Set, rec.Response)
	ids := make([]string, 0, len(open.Questions))
	for _, q := range open.Questions {
		ids = append(ids, q.ID)
	}
	action := pol.OnTimeout.Action
	limit, err := r.runAsks(ctx, rec.Set)
	if err != nil {
		return err
	}
	switch action {
	case "default", "decide", "skip":
		resp := questions.Response{SetID: rec.Set.ID, By: fmt.Sprintf("nobody (no answer within %s; on_timeout: %s)", pol.QuestionTimeout, action),
			Surface: "timeout", At: r.cfg.Now()}
		for _, q := range open.Questions {
			var a questions.Answer
			var err error = errors.New("no default")
			if action == "default" {
				a, err = questions.ParseQuestionAnswer(q, pol.OnTimeout.Option)
			}
			switch {
			case limit && err != nil:
				// Whether to spend more, or to push what the delivery
				// held back, is not the model's to decide: the run's own
				// question nobody answered stops the run.
				a = questions.Answer{QuestionID: q.ID, Labels: []string{limitStop}}
			case err == nil && len(a.Labels) > 0 && questions.KindOf(rec.Set) == questions.KindApproval:
				// An approval's free text is a refusal's reason: the
				// chosen option alone decides (Allow once runs the call).
			case err == nil && len(a.Labels) > 0:
				a.Text = TimeoutText("default", pol.OnTimeout.Option, pol.QuestionTimeout)
			case err == nil: // a free-text question: the option is the answer
				a.Text = pol.OnTimeout.Option + "\n\n" + TimeoutText("default", pol.OnTimeout.Option, pol.QuestionTimeout)
			case action == "skip":
				a = questions.Answer{QuestionID: q.ID, Text: TimeoutText("skip", "", pol.QuestionTimeout)}
			default:
				a = questions.Answer{QuestionID: q.ID, Text: TimeoutText("decide", "", pol.QuestionTimeout)}
			}
			resp.Answers = append(resp.Answers, a)
		}
		return r.record(ctx, run, resp, surfs)
	default:
		return r.fail(ctx, run, fmt.Sprintf("question set %s (%s) got no answer within %s (on_timeout: fail)",
			rec.Set.ID, strings.Join(ids, ", "), pol.QuestionTimeout))
	}
}
