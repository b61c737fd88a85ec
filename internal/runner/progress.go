package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// progressPump folds a run's events into its progress and hands it to the
// surfaces that show progress, from a goroutine of its own: the latest
// progress wins, and the CLI's stream never waits for a surface's API.
type progressPump struct {
	reps  []surfaces.ProgressReporter
	start time.Time
	log   interface {
		Warn(msg string, args ...any)
	}

	mu        sync.Mutex
	p         surfaces.RunProgress
	base      float64 // the run's cost before this drive
	spent     float64 // turns finished in this drive
	turnCost  float64
	dirty     bool
	closed    bool
	wake      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once

	// The tool calls of the drive's current turn, and the refused calls of
	// the run's earlier turns (at most surfaces.MaxRefused, and how many more).
	calls       *ToolCalls
	callsTurn   int
	earlier     []surfaces.RefusedCall
	earlierMore int
}

func reportersOf(ss []surfaces.Surface) []surfaces.ProgressReporter {
	var out []surfaces.ProgressReporter
	for _, s := range ss {
		if p, ok := s.(surfaces.ProgressReporter); ok {
			out = append(out, p)
		}
	}
	return out
}

func (r *Runner) startPump(run store.Run, reps []surfaces.ProgressReporter) *progressPump {
	pp := &progressPump{reps: reps, start: r.cfg.Now(), log: r.log, base: run.CostUSD,
		p:    surfaces.RunProgress{RunID: run.ID, Title: run.Title, Step: "starting", CostUSD: run.CostUSD},
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	pp.dirty = true
	pp.p.Refused, pp.p.RefusedMore = r.refusedBefore(run.ID)
	go pp.loop()
	pp.poke()
	r.pumpsMu.Lock()
	r.pumps[run.ID] = pp
	r.pumpsMu.Unlock()
	return pp
}

// refusedBefore lists the tool calls the CLI refused in the run's turns
// that finished before this drive, from their transcripts (a drive that
// ended waiting for an answer took its own list with it). A transcript that
// cannot be read is left out, with a warning.
func (r *Runner) refusedBefore(runID string) (list []surfaces.RefusedCall, more int) {
	turns, err := r.cfg.Store.Turns(context.Background(), runID)
	if err != nil {
		r.log.Warn("list the run's refused tool calls", "run", runID, "err", err)
		return nil, 0
	}
	for _, t := range turns {
		if !t.Finished || t.TranscriptPath == "" {
			continue
		}
		calls := &ToolCalls{Summarize: toolSummary}
		if err := replayFile(t.TranscriptPath, calls.Observe); err != nil {
			r.log.Warn("list the run's refused tool calls", "run", runID, "turn", t.Seq, "err", err)
			continue
		}
		list, more = addRefused(list, more, t.Seq, calls)
	}
	return list, more
}

func replayFile(path string, observe func(executor.Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = executor.Replay(f, executor.ReaderOptions{}, observe)
	return err
}

// addRefused appends a turn's refused calls to list, counting those over
// surfaces.MaxRefused in more.
func addRefused(list []surfaces.RefusedCall, more, turn int, calls *ToolCalls) ([]surfaces.RefusedCall, int) {
	for _, c := range calls.Refused() {
		if len(list) == surfaces.MaxRefused {
			more++
			continue
		}
		list = append(list, surfaces.RefusedCall{Turn: turn, Tool: clipLine(questions.Printable(c.Name), 60), Summary: c.Summary})
	}
	return list, more
}

func (pp *progressPump) poke() {
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

func (pp *progressPump) loop() {
	defer close(pp.stopped)
	for range pp.wake {
		pp.mu.Lock()
		if !pp.dirty {
			pp.mu.Unlock()
			continue
		}
		p := pp.p
		pp.dirty = false
		pp.mu.Unlock()
		pp.send(p)
	}
}

func (pp *progressPump) send(p surfaces.RunProgress) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, rep := range pp.reps {
		if err := rep.Progress(ctx, p); err != nil {
			pp.log.Warn("show progress", "run", p.RunID, "err", err)
		}
	}
}

// fold updates the progress with an event.
func (pp *progressPump) fold(ev Event, now time.Time) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return // the drive ended: its final progress is on its way
	}
	p := &pp.p
	switch ev.Kind {
	case EventTurnStarted:
		p.Turn, pp.turnCost = ev.Turn, 0
		p.Step = fmt.Sprintf("turn %d running (%s)", ev.Turn, ev.TurnKind)
	case EventToolUse:
		p.ToolUses++
		p.LastTool = ev.Tool
		if ev.Text != "" {
			p.LastTool += ": " + ev.Text
		}
	case EventCost:
		pp.turnCost = ev.CostUSD
	case EventTurnFinished:
		if ev.Outcome != nil {
			pp.spent += ev.Outcome.TurnCostUSD
		}
		pp.turnCost = 0
		p.Step = fmt.Sprintf("turn %d finished", ev.Turn)
	case EventQuestion:
		if ev.Set != nil {
			p.Step = fmt.Sprintf("waiting for an answer to %d question(s) on %s", len(ev.Set.Questions), strings.Join(ev.Surfaces, ", "))
		}
	case EventAnswer:
		if ev.Response != nil {
			p.Step = fmt.Sprintf("answered by %s on %s", ev.Response.By, ev.Response.Surface)
		}
	case EventRetry:
		p.Step = ev.Text
	case EventCorrection:
		p.Step = "asking the model to correct its question block"
	default:
		return
	}
	p.CostUSD = pp.base + pp.spent + pp.turnCost
	p.Elapsed = now.Sub(pp.start)
	pp.dirty = true
	pp.poke()
}

// observe takes a CLI event of the drive's turn: the tool calls the CLI
// refused come from them.
func (pp *progressPump) observe(turn int, ev executor.Event) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return
	}
	if pp.calls == nil || pp.callsTurn != turn {
		pp.earlier, pp.earlierMore = pp.p.Refused, pp.p.RefusedMore
		pp.calls, pp.callsTurn = &ToolCalls{Summarize: toolSummary}, turn
	}
	pp.calls.Observe(ev)
	switch ev.(type) {
	case *executor.SystemOther, *executor.Result: // what names refusals
	default:
		return
	}
	list, more := addRefused(append([]surfaces.RefusedCall(nil), pp.earlier...), pp.earlierMore, turn, pp.calls)
	if len(list) == len(pp.p.Refused) && more == pp.p.RefusedMore {
		return
	}
	pp.p.Refused, pp.p.RefusedMore = list, more
	pp.dirty = true
	pp.poke()
}

// finish stops the pump after handing over the final progress, which says
// how the drive ended.
// abandon stops the pump without a last report (the run is another
// instance's now: it reports).
func (pp *progressPump) abandon() {
	pp.mu.Lock()
	pp.closed = true
	pp.mu.Unlock()
	pp.closeOnce.Do(func() { close(pp.wake) })
	<-pp.stopped
}

func (pp *progressPump) finish(run store.Run, prURL string, err error, now time.Time) {
	pp.mu.Lock()
	pp.closed = true
	pp.mu.Unlock()
	pp.closeOnce.Do(func() { close(pp.wake) })
	<-pp.stopped
	pp.mu.Lock()
	p := pp.p
	pp.mu.Unlock()
	p.Final, p.Elapsed, p.CostUSD, p.PRURL = true, now.Sub(pp.start), run.CostUSD, prURL
	switch {
	case run.Status == store.RunDone:
		p.Step, p.Summary = "done", run.FinalText
	case run.Status == store.RunFailed:
		p.Step, p.Summary = "failed", run.Error
	case run.Status == store.RunCancelled:
		p.Step, p.Summary = "cancelled", run.Error
	case run.Status == store.RunStopped:
		p.Step, p.Summary = "stopped", run.Error
	case run.Status == store.RunWaiting:
		p.Step = "waiting for an answer"
	default:
		p.Step = "interrupted; it resumes with the next start"
		if err != nil {
			p.Summary = err.Error()
		}
	}
	pp.send(p)
}
