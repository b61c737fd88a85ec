package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// errRunCancelled stops a turn whose run was cancelled.
var errRunCancelled = errors.New("the run was cancelled")

// turn runs one turn of the agent CLI and stores how it ended.
func (r *Runner) turn(ctx context.Context, d *drive, run store.Run, t store.Turn) error {
	return r.runTurn(ctx, d, run, t, nil)
}

// answerTurn is the turn that hands rec's answer to the model with prompt:
// it claims the set (BeginTurn), and tells the set's surfaces once the
// answer reached the model.
func (r *Runner) answerTurn(ctx context.Context, d *drive, run store.Run, rec store.SetRecord, prompt string) error {
	t := store.Turn{Kind: store.TurnAnswer, SetID: rec.Set.ID, Prompt: prompt, SessionID: run.SessionID, Resume: true}
	return r.runTurn(ctx, d, run, t, &rec.Set)
}

// runTurn runs turn t; answered is the set an answer turn hands over (nil
// for other turns).
func (r *Runner) runTurn(ctx context.Context, d *drive, run store.Run, t store.Turn, answered *questions.Set) error {
	// No turn starts past a spend cap: the run asks first (caps.go).
	caps, err := r.checkCaps(ctx, d, run)
	if errors.Is(err, errCapAsked) {
		return nil // the loop's next step finds the question, or its answer carried out
	} else if err != nil {
		return err
	}
	workdir, err := r.workdir(ctx, run) // the run's worktree when it delivers through git (deliver.go)
	if err != nil {
		return r.workdirFailed(ctx, run, err)
	}
	if t, err = r.prepareTurn(ctx, d, run, t, workdir); err != nil {
		return err
	}
	release, err := r.takeSlot(ctx, run)
	if err != nil {
		return err
	}
	defer release()
	if len(caps) > 0 {
		// The turn reserves its budget under the caps as it begins, in
		// the transaction that reads what is left (caps.go).
		if t, err = r.capTurn(ctx, d, run, t, caps); err != nil {
			return err
		}
	}
	t, err = r.cfg.Store.BeginTurn(ctx, t) // claims the set of an answer turn
	if errors.Is(err, store.ErrCapReached) {
		// Another turn, begun meanwhile, reserved what was left: the
		// loop's next step waits for it (checkCaps), then asks if the
		// money was spent.
		r.log.Info("spend cap reserved by another turn begun meanwhile", "run", run.ID, "err", err)
		return nil
	} else if err != nil {
		return err
	}
	if t.Kind == store.TurnAnswer {
		r.cfg.Failpoint("claimed")
	}
	if t.FollowUpID != "" {
		r.cfg.Failpoint(FailpointFollowUpClaimed)
	}
	req, native, err := r.turnRequest(ctx, d, run, t, workdir)
	if err != nil {
		return err
	}
	d.capped = t.ReservedUSD > 0 && (req.MaxBudgetUSD <= 0 || t.ReservedUSD < req.MaxBudgetUSD)
	if d.capped {
		req.MaxBudgetUSD = t.ReservedUSD // what was left of the tightest spend cap, reserved
	}
	r.emit(Event{Kind: EventTurnStarted, RunID: run.ID, Turn: t.Seq, TurnKind: t.Kind})
	started := r.cfg.Now()
	// A run cancelled meanwhile (`orchestrator cancel`, from any process)
	// stops the CLI: its process group is interrupted, then killed.
	tctx, stopTurn := context.WithCancelCause(ctx)
	defer stopTurn(nil)
	watched := r.stopWhenCancelled(tctx, stopTurn, run.ID)
	defer func() { stopTurn(nil); <-watched }()
	var live *liveAsker
	if native {
		req.CanUseTool = r.canUseTool(d, run)
		live = r.newLiveAsker(tctx, d, run)
		defer live.stop()
	}
	// What the turn does reaches the store as it happens (sessions.go):
	// an instance taking the run over knows whether the prompt got there.
	saving := r.saveSessionWhileRunning(tctx, d.Agent, run, t, workdir)
	defer saving()
	ex, err := d.Agent.Start(tctx, req)
	if err != nil {
		if context.Cause(tctx) == errRunCancelled {
			return nil // the loop finds the run cancelled
		}
		return r.fail(ctx, run, fmt.Sprintf("start turn %d: %v", t.Seq, err))
	}
	if live != nil {
		live.hold = ex.Hold
	}
	turnOver, killed := r.killWhenLeaseLost(ctx, tctx, run, t, ex)
	if r.cfg.Guard != nil && r.cfg.Store.Shared() && d.token != 0 {
		stopGuard := r.cfg.Guard(run.ID, d.token, ex.PID())
		defer stopGuard()
	}
	if t.Kind == store.TurnAnswer {
		r.cfg.Failpoint("turn-started")
		r.notifyResumed(ctx, d, answered)
	}
	if t.FollowUpID != "" {
		r.followUpStarted(ctx, d, t) // followup.go
	}
	col, out := r.readTurn(run, t, ex, live, started)
	close(turnOver)
	<-killed
	saving()
	if live != nil {
		live.stop()
	}
	return r.turnEnded(ctx, tctx, d, run, t, workdir, out, col)
}

// prepareTurn fills in what t needs before it starts: its run, session and
// transcript directory; a resumed session recorded on another machine is
// put back first (sessions.go).
func (r *Runner) prepareTurn(ctx context.Context, d *drive, run store.Run, t store.Turn, workdir string) (store.Turn, error) {
	t.RunID = run.ID
	if t.SessionID == "" {
		t.SessionID = run.SessionID
	}
	dir := filepath.Join(r.cfg.TranscriptDir, run.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t, fmt.Errorf("transcript dir: %w", err)
	}
	t.TranscriptDir = dir
	if t.Resume {
		r.restoreSession(ctx, d.Agent, run, t.SessionID, workdir)
	}
	return t, nil
}

// turnRequest is the CLI request of turn t (begun), and whether the turn
// asks for approvals natively (approvals.go).
func (r *Runner) turnRequest(ctx context.Context, d *drive, run store.Run, t store.Turn, workdir string) (executor.Request, bool, error) {
	req := executor.Request{Prompt: t.Prompt, WorkDir: workdir, TranscriptPath: t.TranscriptPath, MaxTurns: d.Policy.MaxTurns}
	if d.Policy.MaxCostUSD > 0 {
		turns, err := r.cfg.Store.Turns(ctx, run.ID)
		if err != nil {
			return req, false, err
		}
		req.MaxBudgetUSD = budgetLeft(d.Policy, run.ID, turns, r.cfg.Limits.MaxQuestionRounds)
	}
	native, err := r.approvalsOn(ctx, d, run, workdir) // approvals.go
	if err != nil {
		return req, false, err
	}
	if t.Resume {
		req.Resume = t.SessionID
	} else {
		req.SessionID = t.SessionID
	}
	return req, native, nil
}

// How often a turn on SQLite looks whether its run was cancelled
// (stopWhenCancelled): the store's wake stamp every cancelPollEvery, the
// run itself when the stamp changed, and at least every cancelReadEvery
// should a poke go unseen (Store.WakeStamp).
const (
	cancelPollEvery = 100 * time.Millisecond
	cancelReadEvery = 10 * time.Second
)

// stopWhenCancelled stops the turn (stopTurn with errRunCancelled) once the
// run is cancelled, from any process, until tctx ends. The returned channel
// is closed when it no longer watches.
//
// On PostgreSQL it waits for the run to be final (Store.WaitRunFinal, woken
// by NOTIFY). On SQLite it looks at the store's wake stamp every
// cancelPollEvery instead (a stat of the wake file: Store.WakeStamp), and
// reads the run when it changed: waiting with WaitRunFinal would have the
// store watch the state directory (inotify), and Linux takes 10–20 ms to
// tear such a watch down, which the process pays when it exits — a run
// with no question, the common `orchestrator run`, spent more on that one
// watch than on all its store writes. A cancel, from this process or
// another, stops the turn within cancelPollEvery.
func (r *Runner) stopWhenCancelled(tctx context.Context, stopTurn context.CancelCauseFunc, runID string) <-chan struct{} {
	watched := make(chan struct{})
	stamp, sqlite := r.cfg.Store.WakeStamp()
	go func() {
		defer close(watched)
		if !sqlite {
			if got, err := r.cfg.Store.WaitRunFinal(tctx, runID); err == nil && got.Status == store.RunCancelled {
				stopTurn(errRunCancelled)
			}
			return
		}
		tick := time.NewTicker(cancelPollEvery)
		defer tick.Stop()
		var readAt time.Time
		for first := true; ; first = false {
			if !first {
				select {
				case <-tctx.Done():
					return
				case <-tick.C:
				}
				now, _ := r.cfg.Store.WakeStamp()
				if now == stamp && time.Since(readAt) < cancelReadEvery {
					continue
				}
				stamp = now
			}
			readAt = time.Now()
			got, err := r.cfg.Store.Run(tctx, runID)
			if err != nil {
				continue // tctx ended, or the store failed for now: look again
			}
			if got.Status == store.RunCancelled {
				stopTurn(errRunCancelled)
				return
			}
			if got.Status.Final() {
				return
			}
		}
	}()
	return watched
}

// killWhenLeaseLost kills the CLI at once should the run's lease be lost
// (ctx's cause) before the turn is over: at most one CLI anywhere drives
// the run, and another instance may take it over. Close turnOver when the
// CLI's output is read; killed is closed once the watch is over. A guard
// outside this process (Config.Guard) kills it too should this process
// stall.
func (r *Runner) killWhenLeaseLost(ctx, tctx context.Context, run store.Run, t store.Turn, ex *executor.Process) (turnOver chan struct{}, killed <-chan struct{}) {
	turnOver = make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-tctx.Done():
			if errors.Is(context.Cause(ctx), ErrLeaseLost) {
				r.log.Error("killing the agent CLI: the run's lease was lost", "run", run.ID, "turn", t.Seq, "pid", ex.PID())
				ex.Kill()
			}
		case <-turnOver:
		}
	}()
	return turnOver, done
}

// readTurn reads the CLI's events to the end: questions collected,
// progress reported, the live asker fed. It returns what the turn asked
// and how it ended.
func (r *Runner) readTurn(run store.Run, t store.Turn, ex *executor.Process, live *liveAsker, started time.Time) (*questions.TurnCollector, executor.Outcome) {
	col := &questions.TurnCollector{}
	for ex.Next() {
		ev := ex.Event()
		Collect(col, ev)
		r.progress(run.ID, t.Seq, ev, started)
		if live != nil {
			live.observe(ev)
		}
	}
	return col, ex.Outcome()
}

// turnEnded records how a turn whose CLI returned ended, as the way it was
// stopped says: a lost lease records nothing, a cancelled run finishes the
// turn cancelled, a shutdown leaves it unfinished.
func (r *Runner) turnEnded(ctx, tctx context.Context, d *drive, run store.Run, t store.Turn, workdir string, out executor.Outcome, col *questions.TurnCollector) error {
	if errors.Is(context.Cause(ctx), ErrLeaseLost) {
		// Another instance may have the run: nothing more of this turn is
		// recorded (the store would refuse it anyway).
		return context.Cause(ctx)
	}
	if context.Cause(tctx) == errRunCancelled {
		// The CLI was stopped because the run was cancelled: the turn is
		// finished as cancelled (its cost kept); the run stays cancelled.
		out.Category = executor.CategoryCancelled
		if out.Error == "" {
			out.Error = "the run was cancelled during this turn"
		}
		r.log.Info("stopped the agent: the run was cancelled", "run", run.ID, "turn", t.Seq)
		return r.finish(ctx, d, run, t, workdir, out, col)
	}
	if out.Category == executor.CategoryCancelled && ctx.Err() != nil {
		// Stopped by us (shutdown, ^C): leave the turn unfinished. Whoever
		// resumes the run recovers it, and learns from the session whether
		// the prompt got there.
		return ctx.Err()
	}
	return r.finish(ctx, d, run, t, workdir, out, col)
}

// finish stores a turn's outcome, with the questions it asked (or, for a
// turn stopped at the run's limits, the question whether to go on; see
// limit.go), in one transaction. The CLI's session file (of the turn run in
// workdir) is saved to the store first, and on a shared store its work is
// parked on the run's branch, so that a turn recorded finished has its
// conversation and its work where another machine finds them.
func (r *Runner) finish(ctx context.Context, d *drive, run store.Run, t store.Turn, workdir string, out executor.Outcome, col *questions.TurnCollector) error {
	// The turn happened: record it whatever else is going on.
	ctx = context.WithoutCancel(ctx)
	// The copy commits lazily: FinishTurn, below, makes it durable
	// (store.Lazy).
	r.saveSession(store.Lazy(ctx), d.Agent, run, t, workdir) // sessions.go
	if r.cfg.Park && r.cfg.Store.Shared() {
		// On a shared store another instance may take the run up after
		// this turn (this one dies, or the run parks): the turn's work goes
		// to the run's branch with its conversation, so the two match
		// wherever the run goes on (park.go).
		r.parkWork(ctx, run)
	}
	if d.capped && out.Category == executor.CategoryMaxBudget {
		capStopped(&out, col) // caps.go
	}
	res := store.TurnResult{
		Status:       out.Status,
		Category:     out.Category,
		Error:        out.Error,
		CostUSD:      out.TurnCostUSD, // the session's total counts earlier turns again: see cost.go
		InputTokens:  int64(out.Usage.InputTokens),
		OutputTokens: int64(out.Usage.OutputTokens),
		NumTurns:     out.NumTurns,
		SessionID:    out.SessionID,
		FinalText:    questions.Strip(out.FinalText),
	}
	res.CostUSD = r.turnCost(ctx, run.ID, t.Seq, orDefault(out.SessionID, t.SessionID), out) // cost.go
	out.TurnCostUSD = res.CostUSD                                                            // what the events (metrics, progress) count
	var asked *questions.Set
	if out.Category == "" {
		qs, qerr := col.Questions()
		switch {
		case qerr != nil:
			res.QuestionError = qerr.Error()
		case len(qs) > 0:
			set := questions.NewSet(run.ID, t.Seq, qs)
			set.Title = run.Title
			set.Context = col.Text()
			asked = &set
		}
	}
	if asked != nil {
		n, err := r.questionRounds(ctx, run.ID) // limit.go
		if err != nil {
			return err
		}
		if n >= r.cfg.Limits.MaxQuestionRounds {
			if err := r.cfg.Store.FinishTurn(ctx, run.ID, t.Seq, res, nil, nil); err != nil {
				return err
			}
			return r.fail(ctx, run, fmt.Sprintf("the model asked more than %d rounds of questions (run.max_question_rounds)", r.cfg.Limits.MaxQuestionRounds))
		}
	}
	if isLimit(out.Category) {
		// A preset answering every limit question does not lift them all.
		if why, err := r.limitsSpent(ctx, d.Policy, run, res); err != nil {
			return err
		} else if why != "" {
			if err := r.cfg.Store.FinishTurn(ctx, run.ID, t.Seq, res, nil, nil); err != nil {
				return err
			}
			return r.fail(ctx, run, why)
		}
		set, err := r.limitSet(ctx, d.Policy, run, t.Seq, out)
		if err != nil {
			return err
		}
		asked = &set
	}
	if asked != nil {
		markDefault(asked, d.Policy)
	}
	if err := r.cfg.Store.FinishTurn(ctx, run.ID, t.Seq, res, asked, run.Surfaces); err != nil {
		return err
	}
	if err := r.parked(ctx, run, out); err != nil { // approvals.go
		return err
	}
	if asked != nil {
		r.cfg.Failpoint("question-stored")
	}
	r.emit(Event{Kind: EventTurnFinished, RunID: run.ID, Turn: t.Seq, TurnKind: t.Kind, Outcome: &out})
	return nil
}

// progress turns a CLI event into progress events.
func (r *Runner) progress(runID string, turn int, ev executor.Event, started time.Time) {
	r.pumpsMu.Lock()
	pp := r.pumps[runID]
	r.pumpsMu.Unlock()
	if pp != nil {
		pp.observe(turn, ev)
	}
	switch ev := ev.(type) {
	case *executor.AssistantMessage:
		for _, b := range ev.Content {
			switch b.Type {
			case "text":
				if txt := strings.TrimSpace(secretscan.Redact(questions.Strip(b.Text))); txt != "" {
					r.emit(Event{Kind: EventText, RunID: runID, Turn: turn, Text: txt, Elapsed: r.cfg.Now().Sub(started)})
				}
			case "tool_use":
				r.emit(Event{Kind: EventToolUse, RunID: runID, Turn: turn, Tool: b.ToolName, Text: toolSummary(b.Input),
					Elapsed: r.cfg.Now().Sub(started)})
			}
		}
	case *executor.Result:
		r.emit(Event{Kind: EventCost, RunID: runID, Turn: turn, CostUSD: ev.CostUSD, Elapsed: r.cfg.Now().Sub(started)})
	}
}

// toolSummary gives a short, one-line view of a tool call's input.
// toolSummary is a one-line view of a tool call's input, made printable
// with secrets redacted before the cut, so no part of one is left.
func toolSummary(input json.RawMessage) string {
	return clipLine(secretscan.Redact(questions.Printable(toolInput(input))), 80)
}

// toolInput is the part of a tool call's input that says what it does.
func toolInput(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := m[k].(string); ok {
			return v
		}
	}
	return ""
}

// clipLine puts s on one line of at most n runes, marking a cut.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// Collect feeds the text of a CLI event to a turn's question collector: the
// model's own assistant text blocks (not a sub-agent's), and the result's
// text, which the collector uses only when no assistant text came.
func Collect(col *questions.TurnCollector, ev executor.Event) {
	switch ev := ev.(type) {
	case *executor.AssistantMessage:
		if ev.ParentToolUseID != "" {
			return // a sub-agent's text is not the model asking
		}
		for _, t := range ev.Texts() {
			col.AddAssistantText(t)
		}
	case *executor.Result:
		col.AddResultText(ev.Text)
	}
}

// takeSlot waits for one of Config.CLISlots (none: at once), before the
// turn claims anything, so that a run waiting for room has nothing started.
func (r *Runner) takeSlot(ctx context.Context, run store.Run) (release func(), err error) {
	slots := r.cfg.CLISlots
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
	default:
		r.log.Info("waiting for a free slot: serve.max_concurrent_runs agent CLIs are running", "run", run.ID, "max", cap(slots))
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return func() { <-slots }, nil
}
