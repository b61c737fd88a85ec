package runner

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// closeSet shows set closed without an answer on the surfaces that can
// (surfaces.Closer), so that nobody answers a dead question. Best effort.
func (r *Runner) closeSet(ctx context.Context, set questions.Set, surfs []surfaces.Surface, reason string) {
	closeSetOn(ctx, r.log, set, surfs, reason)
}

func closeSetOn(ctx context.Context, log *slog.Logger, set questions.Set, surfs []surfaces.Surface, reason string) {
	ctx = context.WithoutCancel(ctx)
	for _, s := range surfs {
		if c, ok := s.(surfaces.Closer); ok {
			if err := c.CloseSet(ctx, set, reason); err != nil {
				log.Warn("show question closed on surface", "surface", s.Name(), "set", set.ID, "err", err)
			}
		}
	}
}

// closeExpired shows a set the store expired closed, saying why: its run was
// cancelled, or ended otherwise.
func (r *Runner) closeExpired(ctx context.Context, runID string, set questions.Set, surfs []surfaces.Surface) {
	run, err := r.cfg.Store.Run(context.WithoutCancel(ctx), runID)
	if err != nil {
		r.log.Warn("look up a run to close its question", "run", runID, "err", err)
		return
	}
	r.closeSet(ctx, set, surfs, expiredReason(run))
}

// expiredReason says on a question of run, which the store expired, why it
// is closed: the run was cancelled (by whom), or ended otherwise.
func expiredReason(run store.Run) string {
	reason := "closed: the run ended"
	switch run.Status {
	case store.RunCancelled:
		reason = "cancelled"
		if run.Error != "" {
			reason = run.Error // "cancelled by alice"
		}
	case store.RunFailed, store.RunDone:
		reason = fmt.Sprintf("closed: the run %s", run.Status)
	}
	return reason
}

// runEnded tells the surfaces that keep something per run (surfaces.RunEnder)
// that run ended for good. Best effort.
func (r *Runner) runEnded(ctx context.Context, surfs []surfaces.Surface, run store.Run) {
	runEndedOn(ctx, r.log, surfs, run, r.prURL(ctx, run.ID))
}

// prURL is the page of the pull request that delivered the run, or "" when
// there is none (or it cannot be looked up: logged, the end is said anyway).
func (r *Runner) prURL(ctx context.Context, runID string) string {
	dl, ok, err := r.cfg.Store.Delivery(context.WithoutCancel(ctx), runID)
	if err != nil {
		r.log.Warn("look up the run's pull request", "run", runID, "err", err)
		return ""
	}
	if !ok {
		return ""
	}
	return dl.PRURL
}

func runEndedOn(ctx context.Context, log *slog.Logger, surfs []surfaces.Surface, run store.Run, prURL string) {
	if !run.Status.Final() {
		return
	}
	p := surfaces.RunProgress{RunID: run.ID, Title: run.Title, Step: string(run.Status), Final: true, CostUSD: run.CostUSD, PRURL: prURL}
	switch run.Status {
	case store.RunDone:
		p.Summary = run.FinalText
	default:
		p.Summary = run.Error
	}
	ctx = context.WithoutCancel(ctx)
	for _, s := range surfs {
		if e, ok := s.(surfaces.RunEnder); ok {
			if err := e.RunEnded(ctx, p); err != nil {
				log.Warn("tidy up after the run on surface", "surface", s.Name(), "run", run.ID, "err", err)
			}
		}
	}
}

// TidyEnded does on surfs, for run that ended with no process driving it
// (cancel of a run left waiting), what the process driving a run does when
// it ends: each of sets, expired with the run, is shown closed saying why,
// and the surfaces that keep something per run are told it ended (a run's
// own GitHub issue is closed). Best effort: problems are logged on log.
func TidyEnded(ctx context.Context, log *slog.Logger, run store.Run, sets []questions.Set, surfs []surfaces.Surface) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reason := expiredReason(run)
	for _, set := range sets {
		closeSetOn(ctx, log, set, surfs, reason)
	}
	runEndedOn(ctx, log, surfs, run, "") // cancelled before it was delivered
}

// timedOutReason says on a timed-out question what became of it.
func timedOutReason(pol Policy) string {
	action := pol.OnTimeout.Action
	if action == "" {
		action = "fail"
	}
	return fmt.Sprintf("timed out: no answer within %s (on_timeout: %s)", pol.QuestionTimeout, action)
}
