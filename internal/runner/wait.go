package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	st := r.cfg.Store
	pol := d.Policy
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
	surfs := slices.Clone(d.Surfaces)
	if pol.EscalateTo != nil && !rec.EscalatedAt.IsZero() {
		surfs = append(surfs, pol.EscalateTo)
	}
	ask := unanswered(rec.Set, rec.Response)
	why := ""
	if own, err := r.runAsks(ctx, rec.Set); err != nil {
		return err
	} else if own {
		why = rec.Set.Context
	}
	r.emit(Event{Kind: EventQuestion, RunID: run.ID, Set: &ask, Surfaces: names(surfs), Text: why})
	answers := r.answers(run.ID)
	gone := false    // every surface said it cannot take an answer any more
	var failures int // rounds in a row in which every surface failed
	var retryAt time.Time
	for {
		// What is due already happens before anyone is asked: a timeout
		// that passed while nobody drove the run is not raced by a
		// surface that cannot ask (the terminal's input ended).
		if what, due := r.duePolicyEvent(pol, rec); due {
			done, err := r.policyEvent(ctx, run, &rec, &surfs, pol, what)
			if done || err != nil {
				return err
			}
			if what == policyEscalate {
				gone = false // a new surface to ask
				retryAt = time.Time{}
			}
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		var asked chan error
		var retryTimer *time.Timer
		var retry <-chan time.Time
		switch {
		case len(surfs) == 0 || gone:
			// nobody to ask here: only another process can answer
		case r.cfg.Now().Before(retryAt):
			retryTimer = time.NewTimer(retryAt.Sub(r.cfg.Now()))
			retry = retryTimer.C
		default:
			asked = make(chan error, 1)
			go func() { asked <- surfaces.Ask(actx, r.log, ask, answers, surfs...) }()
		}
		stored := make(chan waited, 1)
		go func() {
			rec, err := st.WaitSet(actx, rec.Set.ID)
			stored <- waited{rec, err}
		}()
		timer, what := r.nextPolicyEvent(pol, rec)
		// stop ends this round of asking and waits for its goroutines.
		stop := func() {
			cancel()
			if asked != nil {
				<-asked
			}
			<-stored
			if timer != nil {
				timer.Stop()
			}
			if retryTimer != nil {
				retryTimer.Stop()
			}
		}
		var tick <-chan time.Time
		if timer != nil {
			tick = timer.C
		}
	round:
		for {
			select {
			case err := <-asked:
				asked = nil
				if err == nil {
					// Every surface saw the set closed: the store says why.
					continue round
				}
				if ctx.Err() != nil {
					stop()
					return ctx.Err()
				}
				if errors.Is(err, surfaces.ErrUnavailable) {
					r.log.Info("no surface can take an answer now; the question stays pending", "run", run.ID, "set", rec.Set.ID)
					if !r.cfg.KeepWaiting {
						stop()
						return fmt.Errorf("question set %s: %w", rec.Set.ID, ErrWaiting)
					}
					gone = true // an answer can still come from another process
					continue round
				}
				// Every surface failed (a 502 posting the question…): ask
				// again after a backoff; the store still takes answers.
				failures++
				backoff := r.cfg.Limits.AskRetryBackoff << min(failures-1, 16)
				if backoff > maxAskBackoff || backoff <= 0 {
					backoff = maxAskBackoff
				}
				retryAt = r.cfg.Now().Add(backoff)
				r.log.Warn("asking failed on every surface; asking again later", "run", run.ID, "set", rec.Set.ID, "in", backoff, "err", err)
				r.emit(Event{Kind: EventRetry, RunID: run.ID, Set: &ask, Surfaces: names(surfs),
					Text: fmt.Sprintf("asking failed on every surface; asking again in %s: %v", backoff, err)})
				retryTimer = time.NewTimer(backoff)
				retry = retryTimer.C
				continue round
			case <-retry:
				stop()
				break round
			case w := <-stored:
				stored <- w // stop() reads it again
				stop()
				if w.err != nil {
					return w.err
				}
				if w.rec.State == store.SetExpired {
					r.closeExpired(ctx, run.ID, w.rec.Set, surfs)
				}
				return r.settled(ctx, run, w.rec, surfs)
			case <-tick:
				if what == policyRemind {
					// A reminder: the surfaces go on asking (asking them
					// again would post the question again, or ask a
					// surface twice); only the policy's timer moves on.
					if _, err := r.policyEvent(ctx, run, &rec, &surfs, pol, what); err != nil {
						stop()
						return err
					}
					timer, what = r.nextPolicyEvent(pol, rec)
					tick = nil
					if timer != nil {
						tick = timer.C
					}
					continue round
				}
				stop()
				done, err := r.policyEvent(ctx, run, &rec, &surfs, pol, what)
				if done || err != nil {
					return err
				}
				if what == policyEscalate {
					gone = false // a new surface to ask
					retryAt = time.Time{}
				}
				break round
			}
		}
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

