package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/approvals/gate"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Native asking and tool approvals (issue 13; docs/approvals.md
// "Approvals and the model's own questions"). With Resolved.Approvals set
// for a run, its agent runs in the CLI's control protocol with the orchestrator's PreToolUse hook (`orchestrator hook`),
// which decides each tool call from the store. While a turn runs, the run
// loop sees each tool call the policy asks about as soon as the model makes
// it, stores its question set (the same one the hook stores: the tool_use_id
// is the key) and asks it on the run's surfaces like any question; the hook
// waits for the answer within approval_hold and hands it to the CLI, or
// defers the call: the turn ends tool_deferred, the run waits with no
// process, and when the answer comes the session is resumed with no prompt —
// the CLI fires the hook again for the deferred call, and the hook hands out
// the decision, once.

// approvalsOn stores the run's policy for its hook, with the agent's
// working directory its path rules are read from; false when native asking
// is off for the run.
func (r *Runner) approvalsOn(ctx context.Context, d *drive, run store.Run, workdir string) (bool, error) {
	if d.Approvals == nil {
		return false, nil
	}
	p := *d.Approvals
	if abs, err := filepath.Abs(workdir); err == nil {
		p.Workdir = abs
	}
	// Written again before every turn, so it needs no fsync of its own
	// (store.Lazy): a power loss that loses it ends the CLI too.
	if err := r.cfg.Store.SetRunPolicy(store.Lazy(ctx), run.ID, p.Encode()); err != nil {
		return false, err
	}
	return true, nil
}

// liveAsker asks the tool calls of a running turn.
type liveAsker struct {
	r      *Runner
	d      *drive
	run    store.Run
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seen   map[string]bool
	// hold, once the CLI has started, says that a person is being asked
	// for it (the hook holds the call): idle_timeout waits (Process.Hold).
	hold func() (release func())
}

func (r *Runner) newLiveAsker(ctx context.Context, d *drive, run store.Run) *liveAsker {
	ctx, cancel := context.WithCancel(ctx)
	return &liveAsker{r: r, d: d, run: run, ctx: ctx, cancel: cancel, seen: map[string]bool{}}
}

// observe starts asking about the tool calls of an assistant message that
// the policy leaves to a person.
func (l *liveAsker) observe(ev executor.Event) {
	// A sub-agent's calls go through the hook too: they are asked as well.
	m, ok := ev.(*executor.AssistantMessage)
	if !ok {
		return
	}
	for _, tu := range m.ToolUses() {
		if tu.ToolUseID == "" || l.seen[tu.ToolUseID] {
			continue
		}
		l.seen[tu.ToolUseID] = true
		call := questions.ToolCall{ToolUseID: tu.ToolUseID, Tool: tu.ToolName, Input: tu.Input}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := l.r.askLive(l.ctx, l.d, l.run, call, l.hold); err != nil && l.ctx.Err() == nil {
				l.r.log.Warn("ask about a tool call", "run", l.run.ID, "tool_use_id", call.ToolUseID, "err", err)
			}
		}()
	}
}

// stop ends the asking (the turn is over: a deferred call is asked again by
// the loop, which waits for it like any question).
func (l *liveAsker) stop() {
	l.cancel()
	l.wg.Wait()
}

// askLive stores call's question set if the policy asks about it, then asks
// it on the run's surfaces until it is answered or the turn ends.
func (r *Runner) askLive(ctx context.Context, d *drive, run store.Run, call questions.ToolCall, hold func() func()) error {
	setID, err := gate.AskIfNeeded(ctx, r.cfg.Store, run.ID, call, true)
	if err != nil || setID == "" {
		return err
	}
	rec, err := r.cfg.Store.QuestionSet(ctx, setID)
	if err != nil || rec.State != store.SetPending {
		return err
	}
	if hold != nil {
		// The hook holds the call while a person is asked: the CLI's
		// silence is not idleness (approval_hold bounds it).
		defer hold()()
	}
	err = r.wait(ctx, d, run, rec)
	if errors.Is(err, ErrWaiting) {
		// Nobody here can answer: the hook parks the call now rather
		// than hold the CLI for nothing.
		return r.cfg.Store.MarkToolDeferred(context.WithoutCancel(ctx), call.ToolUseID)
	}
	return err
}

// canUseTool answers the CLI's own permission requests (calls the hook left
// to the CLI that it still wants a person for): the policy and the stored
// decision first, else a person within the hold, else a refusal — a live
// request cannot be parked.
func (r *Runner) canUseTool(d *drive, run store.Run) func(ctx context.Context, c *executor.ControlRequest) executor.Permission {
	p := *d.Approvals
	return func(ctx context.Context, c *executor.ControlRequest) executor.Permission {
		call := questions.ToolCall{ToolUseID: c.ToolUseID, Tool: c.ToolName, Input: c.Input, Description: c.Description}
		if call.ToolUseID == "" {
			return executor.Permission{Message: "the orchestrator cannot decide a call without a tool_use_id"}
		}
		setID, err := gate.AskForced(ctx, r.cfg.Store, run.ID, call)
		if err != nil {
			return executor.Permission{Message: "the orchestrator could not ask about this call: " + err.Error()}
		}
		if setID != "" && p.Hold > 0 {
			wctx, cancel := context.WithTimeout(ctx, p.Hold)
			if rec, err := r.cfg.Store.QuestionSet(wctx, setID); err == nil && rec.State == store.SetPending {
				_ = r.wait(wctx, d, run, rec)
			}
			cancel()
		}
		c2, take, err := r.cfg.Store.TakeToolDecision(context.WithoutCancel(ctx), call.ToolUseID)
		switch {
		case err != nil:
			return executor.Permission{Message: "the orchestrator could not read the decision: " + err.Error()}
		case take == store.TakeAgain:
			return executor.Permission{Message: gate.Interrupted}
		case take == store.TakeNone:
			// A live request cannot be parked: it is refused, and its
			// question is closed so nobody answers a call that is gone.
			msg := fmt.Sprintf("no one answered within approval_hold (%s); the call was not run", p.Hold)
			if err := r.cfg.Store.DropToolCall(context.WithoutCancel(ctx), call.ToolUseID, msg); err != nil {
				r.log.Warn("close the question of a refused call", "run", run.ID, "tool_use_id", call.ToolUseID, "err", err)
			}
			return executor.Permission{Message: msg}
		case c2.Decision == store.DecisionAllow:
			return executor.Permission{Allow: true, UpdatedInput: c2.UpdatedInput}
		default:
			return executor.Permission{Message: orDefault(c2.Reason, "denied by "+c2.DecidedBy)}
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// droppedReason is what a dropped call's record says.
const droppedReason = "the turn was parked on several tool calls and the CLI kept only one; this call was dropped from the session and did not run (the model may make it again)"

// parked marks the run waiting when its turn ended on a deferred tool call
// a person is asked about.
func (r *Runner) parked(ctx context.Context, run store.Run, out executor.Outcome) error {
	if out.Status != executor.StatusDeferred || out.DeferredToolUse == nil {
		return nil
	}
	c, err := r.cfg.Store.ToolCall(ctx, out.DeferredToolUse.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.SetID == "" {
		return nil
	}
	if err := r.cfg.Store.MarkToolDeferred(ctx, c.ToolUseID); err != nil {
		return err
	}
	// The CLI keeps one deferred call of a turn; the others it drops from
	// the session without running them (docs/claude-cli.md). Nobody is
	// asked about those any more.
	calls, err := r.cfg.Store.ToolCalls(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, o := range calls {
		if o.ToolUseID != c.ToolUseID && o.Deferred && o.Decision == "" && o.UsedAt.IsZero() {
			r.log.Warn("the CLI dropped a deferred tool call of the turn; it did not run", "run", run.ID, "tool_use_id", o.ToolUseID, "tool", o.Tool)
			if err := r.cfg.Store.DropToolCall(ctx, o.ToolUseID, droppedReason); err != nil {
				return err
			}
		}
	}
	rec, err := r.cfg.Store.QuestionSet(ctx, c.SetID)
	if err != nil || rec.State != store.SetPending {
		return err
	}
	return r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunWaiting})
}

// toolAnswerPrompt is the prompt of a turn that carries a tool call's
// answer: none when the turn parked on the call — the resumed session fires
// the hook again for the deferred call, and the hook hands out the decision.
// A call the session is not waiting on (its turn ended another way) gets the
// usual answer prompt instead (ok false).
func (r *Runner) toolAnswerPrompt(ctx context.Context, set questions.Set) (string, bool) {
	if questions.KindOf(set) == questions.KindMarker || set.Tool == nil {
		return "", false
	}
	c, err := r.cfg.Store.ToolCall(ctx, set.Tool.ToolUseID)
	if err != nil || !c.Deferred {
		return "", false
	}
	return "", true
}

// toolAnswerHandedOut says, for a turn that carried a tool call's answer
// (no prompt: the hook hands it over), whether the hook handed the decision
// to the CLI: then the answer reached the session. ok is false for any
// other turn.
func (r *Runner) toolAnswerHandedOut(ctx context.Context, t store.Turn) (used, ok bool) {
	if t.Kind != store.TurnAnswer || t.Prompt != "" || t.SetID == "" {
		return false, false
	}
	rec, err := r.cfg.Store.QuestionSet(ctx, t.SetID)
	if err != nil || rec.Set.Tool == nil {
		return false, false
	}
	c, err := r.cfg.Store.ToolCall(ctx, rec.Set.Tool.ToolUseID)
	if err != nil {
		return false, true
	}
	return !c.UsedAt.IsZero(), true
}

// interruptedCallPrompt is the prompt of the turn that carries the answer
// to an approval whose process died while it was asked live (the CLI's
// session holds the call as interrupted; it never ran): the call is settled
// in the store (RetryToolCall) and the model told what became of it.
// Allowed, it is told to make the very same call again, which then runs
// once without a question (the hook finds the grant); refused, not to. ok
// is false for any other set.
func (r *Runner) interruptedCallPrompt(ctx context.Context, rec store.SetRecord, answers string) (string, bool, error) {
	if questions.KindOf(rec.Set) != questions.KindApproval || rec.Set.Tool == nil {
		return "", false, nil
	}
	id := rec.Set.Tool.ToolUseID
	c, granted, err := r.cfg.Store.RetryToolCall(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[answers to question set %s]\n", rec.Set.ID)
	fmt.Fprintf(&b, "The orchestrator stopped while your %s call (tool_use_id %s) waited for a person's approval, so that process could not run it: your session shows the call interrupted. ", c.Tool, id)
	switch {
	case granted:
		b.WriteString("It has since been allowed (the answer is below). Make exactly the same call again, with the same input: it will run once, without asking again.")
		if in := compactJSON(c.Input); in != "" && len(in) <= maxRetryInput {
			fmt.Fprintf(&b, " Its input was: %s", in)
		}
	case c.Decision == store.DecisionDeny:
		b.WriteString("It did not run, and it has since been refused (the answer is below): do not make it again; go on with the task without it.")
	default:
		b.WriteString(gate.Interrupted + ".")
	}
	b.WriteString("\n\n")
	b.WriteString(answers)
	return b.String(), true, nil
}

// maxRetryInput caps the input repeated in the prompt of a call to make
// again (the session has it in full).
const maxRetryInput = 2000

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}
