package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// unanswered is set less the questions already answered in resp.
func unanswered(set questions.Set, resp questions.Response) questions.Set {
	return questions.Unanswered(set, resp)
}

// wait asks a pending set on the run's surfaces and waits for the store to
// say it is no longer pending: answered on a surface (which offers the
// answer to the store, see storeAnswers), by another process (`orchestrator
// answer`), by a preset, or by the timeout policy. It returns once the set
// is answered (the loop then resumes the session), or why it stopped
// waiting. Surfaces that all fail are asked again after a backoff; the
// store is watched meanwhile.
func (r *Runner) wait(ctx context.Context, d *drive, run store.Run, rec store.SetRecord) error {
	w, done, err := r.startWaiting(ctx, d, run, rec)
	for !done && err == nil {
		done, err = w.round(ctx)
	}
	return err
}

// waiting is one wait for a pending set: the set as last known (its policy
// times), who is asked, and how asking went so far. Its rounds run one
// after the other, on the wait's goroutine.
type waiting struct {
	r       *Runner
	run     store.Run
	pol     Policy
	rec     store.SetRecord
	surfs   []surfaces.Surface
	ask     questions.Set // the questions still open when the wait began
	answers *storeAnswers
	// gone: every surface said it cannot take an answer any more; only
	// another process can answer.
	gone bool
	// failures counts the rounds in a row in which every surface failed;
	// retryAt is when to ask them again.
	failures int
	retryAt  time.Time
}

// startWaiting answers what the presets answer and says who is asked the
// rest. done is true when the presets answered every question.
func (r *Runner) startWaiting(ctx context.Context, d *drive, run store.Run, rec store.SetRecord) (w *waiting, done bool, err error) {
	pol := d.Policy
	if len(pol.Presets) > 0 {
		if resp := presetResponse(unanswered(rec.Set, rec.Response), pol.Presets, r.cfg.Now()); len(resp.Answers) > 0 {
			got, err := r.cfg.Store.RecordAnswer(ctx, resp)
			if err != nil && !errors.Is(err, store.ErrAlreadyAnswered) {
				return nil, true, err
			}
			r.emit(Event{Kind: EventAnswer, RunID: run.ID, Set: &rec.Set, Response: &resp})
			if got.State != store.SetPending {
				return nil, true, nil
			}
			rec = got
		}
	}
	w = &waiting{r: r, run: run, pol: pol, rec: rec, surfs: slices.Clone(d.Surfaces), answers: r.answers(run.ID)}
	if pol.EscalateTo != nil && !rec.EscalatedAt.IsZero() {
		w.surfs = append(w.surfs, pol.EscalateTo)
	}
	w.ask = unanswered(rec.Set, rec.Response)
	why := ""
	if own, err := r.runAsks(ctx, rec.Set); err != nil {
		return nil, true, err
	} else if own {
		why = rec.Set.Context
	}
	r.emit(Event{Kind: EventQuestion, RunID: run.ID, Set: &w.ask, Surfaces: names(w.surfs), Text: why})
	return w, false, nil
}

// round is one round of asking: the surfaces asked (or the timer of the
// next try after they all failed), the store watched for the set, and the
// policy's next timer. It ends when the store says the set is settled
// (done), when the policy or a retry needs a new round, or on an error.
func (w *waiting) round(ctx context.Context) (done bool, err error) {
	// What is due already happens before anyone is asked: a timeout that
	// passed while nobody drove the run is not raced by a surface that
	// cannot ask (the terminal's input ended).
	if what, due := w.r.duePolicyEvent(w.pol, w.rec); due {
		return w.policy(ctx, what)
	}
	rd := w.startRound(ctx)
	defer rd.stop()
	for {
		select {
		case err := <-rd.asked:
			rd.asked = nil
			if done, err := w.askEnded(ctx, rd, err); done || err != nil {
				return true, err
			}
		case <-rd.retry:
			return false, nil // a new round asks again
		case got := <-rd.stored:
			rd.stored = nil
			rd.stop()
			return true, w.settled(ctx, got)
		case <-rd.tick:
			if rd.what == policyRemind {
				// A reminder: the surfaces go on asking (asking them again
				// would post the question again, or ask a surface twice);
				// only the policy's timer moves on.
				if _, err := w.policy(ctx, policyRemind); err != nil {
					return true, err
				}
				rd.arm(w.r.nextPolicyEvent(w.pol, w.rec))
				continue
			}
			rd.stop()
			return w.policy(ctx, rd.what)
		}
	}
}

// policy carries out a reminder, an escalation or a timeout (policyEvent);
// an escalation brings a new surface to ask at once.
func (w *waiting) policy(ctx context.Context, what policyWhat) (done bool, err error) {
	done, err = w.r.policyEvent(ctx, w.run, &w.rec, &w.surfs, w.pol, what)
	if err == nil && !done && what == policyEscalate {
		w.gone, w.retryAt = false, time.Time{}
	}
	return done, err
}

// askEnded handles the end of the surfaces' Ask: done when the wait ends
// with it.
func (w *waiting) askEnded(ctx context.Context, rd *asking, err error) (done bool, _ error) {
	r := w.r
	switch {
	case err == nil:
		return false, nil // every surface saw the set closed: the store says why
	case ctx.Err() != nil:
		return true, ctx.Err()
	case errors.Is(err, surfaces.ErrUnavailable):
		r.log.Info("no surface can take an answer now; the question stays pending", "run", w.run.ID, "set", w.rec.Set.ID)
		if !r.cfg.KeepWaiting {
			return true, fmt.Errorf("question set %s: %w", w.rec.Set.ID, ErrWaiting)
		}
		w.gone = true // an answer can still come from another process
		return false, nil
	}
	// Every surface failed (a 502 posting the question…): ask again after
	// a backoff; the store still takes answers.
	w.failures++
	backoff := retry.Backoff{Initial: r.cfg.Limits.AskRetryBackoff, Max: maxAskBackoff, Jitter: retry.Jitter}.Wait(w.failures - 1)
	w.retryAt = r.cfg.Now().Add(backoff)
	r.log.Warn("asking failed on every surface; asking again later", "run", w.run.ID, "set", w.rec.Set.ID, "in", backoff, "err", err)
	r.emit(Event{Kind: EventRetry, RunID: w.run.ID, Set: &w.ask, Surfaces: names(w.surfs),
		Text: fmt.Sprintf("asking failed on every surface; asking again in %s: %v", backoff, err)})
	rd.retryIn(backoff)
	return false, nil
}

// settled reports the set the store says is no longer pending.
func (w *waiting) settled(ctx context.Context, got waited) error {
	if got.err != nil {
		return got.err
	}
	if got.rec.State == store.SetExpired {
		w.r.closeExpired(ctx, w.run.ID, got.rec.Set, w.surfs)
	}
	return w.r.settled(ctx, w.run, got.rec, w.surfs)
}

// asking is what one round started: the surfaces' Ask (asked, nil when
// nobody is asked this round or once it returned), the store's wait for the
// set (stored, nil once read), the policy's timer (tick, for what) and the
// timer of the next try (retry).
type asking struct {
	cancel            context.CancelFunc
	asked             chan error
	stored            chan waited
	timer, retryTimer *time.Timer
	tick, retry       <-chan time.Time
	what              policyWhat
	stopped           bool
}

// startRound asks the surfaces, unless nobody can be asked or they are
// to be asked again later, and watches the store for the set.
func (w *waiting) startRound(ctx context.Context) *asking {
	actx, cancel := context.WithCancel(ctx)
	rd := &asking{cancel: cancel, stored: make(chan waited, 1)}
	switch now := w.r.cfg.Now(); {
	case len(w.surfs) == 0 || w.gone:
		// nobody to ask here: only another process can answer
	case now.Before(w.retryAt):
		rd.retryIn(w.retryAt.Sub(now))
	default:
		rd.asked = make(chan error, 1)
		ask, surfs, answers, log := w.ask, w.surfs, w.answers, w.r.log
		go func() { rd.asked <- surfaces.Ask(actx, log, ask, answers, surfs...) }()
	}
	st, id := w.r.cfg.Store, w.rec.Set.ID
	go func() {
		rec, err := st.WaitSet(actx, id)
		rd.stored <- waited{rec, err}
	}()
	rd.arm(w.r.nextPolicyEvent(w.pol, w.rec))
	return rd
}

// arm sets the policy's timer of the round.
func (rd *asking) arm(timer *time.Timer, what policyWhat) {
	rd.timer, rd.what, rd.tick = timer, what, nil
	if timer != nil {
		rd.tick = timer.C
	}
}

// retryIn sets the timer of the next try.
func (rd *asking) retryIn(d time.Duration) {
	rd.retryTimer = time.NewTimer(d)
	rd.retry = rd.retryTimer.C
}

// stop ends the round's asking and waits for its goroutines; again, it
// does nothing.
func (rd *asking) stop() {
	if rd.stopped {
		return
	}
	rd.stopped = true
	rd.cancel()
	if rd.asked != nil {
		<-rd.asked
	}
	if rd.stored != nil {
		<-rd.stored
	}
	if rd.timer != nil {
		rd.timer.Stop()
	}
	if rd.retryTimer != nil {
		rd.retryTimer.Stop()
	}
}

// maxAskBackoff bounds the wait before asking again on surfaces that all
// failed.
const maxAskBackoff = 5 * time.Minute

type waited struct {
	rec store.SetRecord
	err error
}

func names(ss []surfaces.Surface) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name()
	}
	return out
}
