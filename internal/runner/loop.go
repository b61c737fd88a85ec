package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Drive carries the run forward until it is done, failed or cancelled, or
// waits on a question no surface of this process can take (ErrWaiting), or
// ctx ends (the run is left interrupted or waiting, resumable). It returns
// the run as it then stands. Another process driving the same run makes
// Drive fail at once with an error wrapping store.ErrLocked.
func (r *Runner) Drive(ctx context.Context, runID string) (store.Run, error) {
	run, err := r.cfg.Store.Run(ctx, runID)
	if err != nil {
		return store.Run{}, err
	}
	lock, err := r.cfg.Store.LockRun(run.ID)
	if err != nil {
		return run, fmt.Errorf("run %s: %w", run.ID, err)
	}
	defer lock.Unlock()
	// Every write of this drive carries the take's fencing token: once
	// another process took the run's lock, the store refuses them.
	ctx = store.WithFence(ctx, run.ID, lock.Token())
	// A lost lease stops the drive at once (and kills its CLI: turn.go):
	// another instance may have the run by now, and nothing of this drive
	// may write to it any more.
	ctx, stopDrive := context.WithCancelCause(ctx)
	defer stopDrive(nil)
	if lost := lock.Lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				stopDrive(ErrLeaseLost)
			case <-ctx.Done():
			}
		}()
	}
	if run.Status == store.RunQueued && run.Host == "" && r.cfg.Store.Shared() {
		if movable, err := r.movable(run); err == nil && !movable {
			// Its working directory is on this machine from now on.
			if err := r.cfg.Store.SetRunHost(ctx, run.ID, store.Hostname()); err != nil {
				return run, err
			}
		}
	}
	d := &drive{token: lock.Token()}
	if !run.Status.Final() {
		res, rerr := r.cfg.Resolve(run)
		if rerr != nil {
			// The loop then finds the run failed, and stops.
			if ferr := r.fail(ctx, run, rerr.Error()); ferr != nil {
				return run, errors.Join(rerr, ferr)
			}
		}
		d.Resolved = res
	}
	var pump *progressPump
	if reps := reportersOf(d.Surfaces); len(reps) > 0 {
		pump = r.startPump(run, reps)
	}
	err = r.loop(ctx, d, run.ID)
	if errors.Is(context.Cause(ctx), ErrLeaseLost) || errors.Is(err, ErrLeaseLost) {
		r.log.Error("lost the run's lease; leaving it to the instance that has it", "run", run.ID)
		if pump != nil {
			r.pumpsMu.Lock()
			delete(r.pumps, run.ID)
			r.pumpsMu.Unlock()
			pump.abandon()
		}
		return run, fmt.Errorf("run %s: %w", run.ID, ErrLeaseLost)
	}
	bg := context.WithoutCancel(ctx)
	if err != nil && !errors.Is(err, ErrWaiting) && !errors.Is(err, ErrParked) {
		// Shut down, cancelled, or stopped by an error while working: leave
		// the run resumable, and say so in its status.
		r.suspend(bg, run.ID)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	latest, lerr := r.cfg.Store.Run(bg, run.ID)
	if lerr != nil {
		latest, err = run, errors.Join(err, lerr)
	} else if err == nil || errors.Is(err, ErrWaiting) || errors.Is(err, ErrParked) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		r.emit(Event{Kind: EventRunEnded, RunID: run.ID, Run: &latest, Err: err})
	}
	if pump != nil {
		r.pumpsMu.Lock()
		delete(r.pumps, run.ID)
		r.pumpsMu.Unlock()
		pr := ""
		if lerr == nil && latest.Status == store.RunDone {
			pr = r.prURL(bg, run.ID)
		}
		pump.finish(latest, pr, err, r.cfg.Now())
	}
	if lerr == nil {
		// Whatever the agent did to the checkout's git configuration and
		// hooks does not outlive the drive, delivered or not.
		r.release(bg, latest)
		r.runEnded(bg, d.Surfaces, latest) // after the final progress: it may close the run's issue
	}
	return latest, err
}

// emit sends a progress event to the observer, and to the run's progress
// pump when its surfaces show progress.
func (r *Runner) emit(ev Event) {
	r.cfg.Observe(ev)
	r.pumpsMu.Lock()
	pp := r.pumps[ev.RunID]
	r.pumpsMu.Unlock()
	if pp != nil {
		pp.fold(ev, r.cfg.Now())
	}
}

// suspend marks a run that was being worked on as interrupted, unless it is
// waiting on a question (it stays waiting) or already final.
func (r *Runner) suspend(ctx context.Context, runID string) {
	run, err := r.cfg.Store.Run(ctx, runID)
	if err != nil || run.Status.Final() || run.Status == store.RunWaiting {
		return
	}
	if err := r.cfg.Store.UpdateRun(ctx, runID, store.RunUpdate{Status: store.RunInterrupted}); err != nil {
		r.log.Error("mark run interrupted", "run", runID, "err", err)
	}
}

func (r *Runner) fail(ctx context.Context, run store.Run, msg string) error {
	ctx = context.WithoutCancel(ctx)
	if err := r.cfg.Store.ExpireSets(ctx, run.ID); err != nil {
		r.log.Error("expire question sets", "run", run.ID, "err", err)
	}
	if err := r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunFailed, Error: &msg}); err != nil {
		return err
	}
	return nil
}

// drive is what one Drive of a run carries from step to step: what the run
// was resolved to when the drive began.
type drive struct {
	Resolved
	// token is the fencing token of the drive's take of the run's lock.
	token int64
	// capped: the turn running was given what is left of a spend cap as
	// its budget, less than the run's own (caps.go).
	capped bool
}

// loop takes steps until the run is final or a step says stop.
func (r *Runner) loop(ctx context.Context, d *drive, runID string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		run, err := r.cfg.Store.Run(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status.Final() {
			return nil
		}
		if err := r.step(ctx, d, run); err != nil {
			return err
		}
	}
}

// step takes the one next step of run, as the store says it stands.
func (r *Runner) step(ctx context.Context, d *drive, run store.Run) error {
	st := r.cfg.Store
	last, ok, err := st.LastTurn(ctx, run.ID)
	if err != nil {
		return err
	}
	if !ok {
		return r.turn(ctx, d, run, store.Turn{Kind: store.TurnStart, Prompt: run.Prompt, SessionID: run.SessionID})
	}
	if !last.Finished {
		return r.recover(ctx, d, run, last)
	}
	sets, err := st.OpenSets(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, rec := range sets {
		if rec.State == store.SetAnswered {
			return r.resumeWithAnswer(ctx, d, run, rec)
		}
	}
	if len(sets) > 0 {
		if r.cfg.Park {
			// The run waits with no process: serve's ask room asks the
			// set (room.go), and a worker drives the run on once it is
			// answered. On a shared store another instance may resume
			// it: its work so far is on the run's branch (each turn parks
			// it: finish), unless that failed; try again (idempotent, and
			// cheap when nothing changed).
			if r.cfg.Store.Shared() {
				r.parkWork(ctx, run)
			}
			return fmt.Errorf("run %s, question set %s: %w", run.ID, sets[0].Set.ID, ErrParked)
		}
		return r.wait(ctx, d, run, sets[0])
	}
	if f, ok, err := st.PendingFollowUp(ctx, run.ID); err != nil {
		return err
	} else if ok {
		return r.followUp(ctx, d, run, last, f) // followup.go
	}
	res := last.Result
	switch {
	case res.Category == store.CategoryNotDelivered:
		// The prompt never reached the session: send it again, as it was.
		return r.turn(ctx, d, run, store.Turn{Kind: last.Kind, Prompt: last.Prompt, SessionID: last.SessionID, Resume: last.Resume})
	case res.Category == store.CategoryInterrupted:
		prompt := continuePrompt + r.interruptedCalls(ctx, d, run, sessionOf(run, last)) // recover.go
		return r.turn(ctx, d, run, store.Turn{Kind: store.TurnContinue, Prompt: prompt, SessionID: sessionOf(run, last), Resume: true})
	case res.Category == executor.CategoryRateLimit:
		return r.retry(ctx, d, run, last)
	case res.Category == CategorySpendCap:
		// Stopped at what was left of a spend cap: the turn that goes on
		// asks about the cap before it starts (caps.go).
		return r.turn(ctx, d, run, store.Turn{Kind: store.TurnContinue, Prompt: capContinuePrompt, SessionID: sessionOf(run, last), Resume: true})
	case res.QuestionError != "":
		return r.correct(ctx, d, run, last)
	case res.Category == "" && res.Status == executor.StatusSuccess:
		return r.done(ctx, d, run, last) // delivers the run's work first (deliver.go)
	case res.Status == executor.StatusDeferred:
		return r.fail(ctx, run, fmt.Sprintf("turn %d ended on a tool call a PreToolUse hook deferred (%s) that the orchestrator has no question for; it cannot resume it",
			last.Seq, res.Category))
	case res.Category == executor.CategoryToolDeferredUnavailable:
		return r.fail(ctx, run, fmt.Sprintf("turn %d: the tool call the session was waiting on is not available any more (an MCP server that is gone, or a session resumed without the control protocol): %s",
			last.Seq, res.Error))
	case res.Category == executor.CategorySessionNotFound:
		return r.fail(ctx, run, fmt.Sprintf("the CLI has no session %s any more (its session store under $HOME/.claude was removed, or this is another machine or user, and the orchestrator's store had no copy of it to put back): %s",
			sessionOf(run, last), res.Error))
	default:
		msg := res.Error
		if msg == "" {
			msg = "the agent turn ended without a result"
		}
		return r.fail(ctx, run, fmt.Sprintf("turn %d failed (%s): %s", last.Seq, orUnknown(string(res.Category)), msg))
	}
}

const continuePrompt = "The orchestrator was stopped before your last turn finished. Continue the task from where you left off."

const retryPrompt = "The previous request failed with a temporary API error (rate limit). Continue the task from where you left off."

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func sessionOf(run store.Run, last store.Turn) string {
	if last.SessionID != "" {
		return last.SessionID
	}
	return run.SessionID
}

// trailing counts the run's last turns that satisfy f.
func (r *Runner) trailing(ctx context.Context, runID string, f func(store.Turn) bool) (int, error) {
	turns, err := r.cfg.Store.Turns(ctx, runID)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := len(turns) - 1; i >= 0 && f(turns[i]); i-- {
		n++
	}
	return n, nil
}

func (r *Runner) retry(ctx context.Context, d *drive, run store.Run, last store.Turn) error {
	n, err := r.trailing(ctx, run.ID, func(t store.Turn) bool { return t.Result.Category == executor.CategoryRateLimit })
	if err != nil {
		return err
	}
	if n > r.cfg.Limits.RateLimitRetries {
		return r.fail(ctx, run, fmt.Sprintf("rate limited %d times in a row; giving up: %s", n, last.Result.Error))
	}
	wait := retry.Backoff{Initial: r.cfg.Limits.RateLimitBackoff, Max: 30 * time.Minute, Jitter: retry.Jitter}.Wait(n - 1)
	r.emit(Event{Kind: EventRetry, RunID: run.ID, Text: fmt.Sprintf("rate limited; retrying in %s (%d/%d)", wait, n, r.cfg.Limits.RateLimitRetries)})
	if err := r.cfg.Sleep(ctx, wait); err != nil {
		return err
	}
	return r.turn(ctx, d, run, store.Turn{Kind: store.TurnRetry, Prompt: retryPrompt, SessionID: sessionOf(run, last), Resume: true})
}

func (r *Runner) correct(ctx context.Context, d *drive, run store.Run, last store.Turn) error {
	n, err := r.trailing(ctx, run.ID, func(t store.Turn) bool { return t.Result.QuestionError != "" })
	if err != nil {
		return err
	}
	if n > r.cfg.Limits.MaxCorrections {
		return r.fail(ctx, run, fmt.Sprintf("the model's QUESTION block was still not valid after %d correction prompts: %s",
			r.cfg.Limits.MaxCorrections, last.Result.QuestionError))
	}
	r.emit(Event{Kind: EventCorrection, RunID: run.ID, Text: last.Result.QuestionError})
	prompt := questions.CorrectionPrompt(errors.New(last.Result.QuestionError))
	return r.turn(ctx, d, run, store.Turn{Kind: store.TurnCorrection, Prompt: prompt, SessionID: sessionOf(run, last), Resume: true})
}

// resumeWithAnswer hands an answered set to the model, exactly once: the set
// is claimed in the transaction that records the turn, before the CLI starts.
func (r *Runner) resumeWithAnswer(ctx context.Context, d *drive, run store.Run, rec store.SetRecord) error {
	if questions.KindOf(rec.Set) == questions.KindSecrets {
		return r.afterSecrets(ctx, d, run, rec) // secrets.go
	}
	if questions.KindOf(rec.Set) == questions.KindCap {
		return r.afterCap(ctx, d.Policy, run, rec) // caps.go
	}
	if rec.Response.Surface == store.RuleSurface {
		// A remembered decision answered the set as it was stored: nobody
		// was asked, so this is where its answer is reported.
		final := rec.Response
		r.emit(Event{Kind: EventAnswer, RunID: run.ID, Set: &rec.Set, Response: &final})
	}
	if limit, err := r.isLimitSet(ctx, rec.Set); err != nil {
		return err
	} else if limit {
		return r.afterLimit(ctx, d, run, rec)
	}
	prompt := answerPrompt(rec.Set, rec.Response, r.cfg.Limits.AnswerMaxBytes)
	if p, ok := r.toolAnswerPrompt(ctx, rec.Set); ok {
		prompt = p // the hook hands the answer over (approvals.go)
	} else if p, ok, err := r.interruptedCallPrompt(ctx, rec, prompt); err != nil {
		return err
	} else if ok {
		prompt = p // the model makes the call again (approvals.go)
	}
	return r.answerTurn(ctx, d, run, rec, prompt)
}

// answerPrompt is the prompt that carries a set's answers. It always names
// the set's ID: after a crash the loop looks for it in the CLI's session to
// learn whether the answer already reached the model.
func answerPrompt(set questions.Set, resp questions.Response, max int) string {
	p := questions.FormatResponse(set, resp, questions.FormatOptions{MaxBytes: max})
	if !strings.Contains(p, set.ID) {
		p = fmt.Sprintf("[answers to question set %s]\n%s", set.ID, p)
	}
	return p
}
