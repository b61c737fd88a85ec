package runner

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// needle is what identifies a turn's prompt in the CLI's session record.
func needle(t store.Turn) string {
	switch t.Kind {
	case store.TurnAnswer:
		return t.SetID
	case store.TurnStart:
		line := strings.TrimSpace(t.Prompt)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if r := []rune(line); len(r) > 60 {
			line = string(r[:60])
		}
		return line
	}
	return ""
}

// recover deals with a turn the process died during (or was cancelled in):
// its own transcript may hold the whole outcome; otherwise the CLI's session
// tells whether the prompt got there.
func (r *Runner) recover(ctx context.Context, d *drive, run store.Run, t store.Turn) error {
	agent := d.Agent
	// The turn may have run on another machine: look into the session as
	// the store last saved it, unless this machine's copy has it all
	// (sessions.go). Without a working directory there is nothing to
	// restore into; the turn that follows fails on it.
	workdir, werr := r.workdir(ctx, run)
	if werr == nil {
		r.restoreSession(ctx, agent, run, sessionOf(run, t), workdir)
	} else {
		r.log.Warn("cannot restore the CLI's session before recovering a turn", "run", run.ID, "turn", t.Seq, "err", werr)
	}
	if t.TranscriptPath != "" {
		if out, col, ok := replay(t.TranscriptPath); ok {
			r.log.Info("recovered a finished turn from its transcript", "run", run.ID, "turn", t.Seq)
			return r.finish(ctx, d, run, t, workdir, out, col)
		}
	}
	delivered := false
	if used, ok := r.toolAnswerHandedOut(ctx, t); ok { // approvals.go
		delivered = used
	} else if n := needle(t); n != "" {
		var err error
		delivered, err = agent.SessionTranscriptHas(sessionOf(run, t), n)
		if err != nil && !errors.Is(err, executor.ErrSessionFileNotFound) {
			r.log.Warn("cannot read the CLI's session; assuming the prompt did not reach it", "run", run.ID, "err", err)
			delivered = false
		}
	}
	r.log.Info("recovering an interrupted turn", "run", run.ID, "turn", t.Seq, "kind", t.Kind, "prompt_delivered", delivered)
	if delivered {
		// The prompt is in this machine's session: save it before the
		// turn is recorded delivered, or a resume elsewhere would continue
		// a conversation that never got it.
		if werr == nil {
			r.saveSession(ctx, agent, run, t, workdir)
		}
		return r.cfg.Store.MarkTurnDelivered(ctx, run.ID, t.Seq)
	}
	return r.cfg.Store.AbandonTurn(ctx, run.ID, t.Seq)
}

// replay reads a turn's saved transcript; ok is true when it holds a result.
func replay(path string) (executor.Outcome, *questions.TurnCollector, bool) {
	f, err := os.Open(path)
	if err != nil {
		return executor.Outcome{}, nil, false
	}
	defer f.Close()
	col := &questions.TurnCollector{}
	out, err := executor.Replay(f, executor.ReaderOptions{}, func(ev executor.Event) { Collect(col, ev) })
	if err != nil || out.Result == nil {
		return executor.Outcome{}, nil, false
	}
	if strings.HasPrefix(out.TerminalReason, "aborted") {
		// The CLI was interrupted (SIGINT/SIGTERM) and wrote a result for
		// the aborted stream: the turn did not finish.
		return executor.Outcome{}, nil, false
	}
	return out, col, true
}
