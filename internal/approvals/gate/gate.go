// Package gate is the store-backed side of tool approvals: it decides one
// tool call of a run — a decision stored for it, the run's policy
// (package approvals, pure rules), the calls a person allowed for the run —
// and otherwise stores the question set a person answers. The run loop
// (AskIfNeeded, AskForced) and the CLI's PreToolUse hook (Hook) meet here;
// the store decides who was first.
package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Store is what the gate needs of the store.
type Store interface {
	TakeToolDecision(ctx context.Context, toolUseID string) (store.ToolCall, store.Take, error)
	DecideTool(ctx context.Context, call store.ToolCall) (store.ToolCall, error)
	AskTool(ctx context.Context, call store.ToolCall, set questions.Set, surfaces []string, live bool) (store.ToolCall, bool, error)
	QuestionSet(ctx context.Context, id string) (store.SetRecord, error)
	WaitSet(ctx context.Context, id string) (store.SetRecord, error)
	MarkToolDeferred(ctx context.Context, toolUseID string) error
	ToolCall(ctx context.Context, toolUseID string) (store.ToolCall, error)
	RunPolicy(ctx context.Context, runID string) (json.RawMessage, error)
	RunRules(ctx context.Context, runID string) ([]string, error)
	Run(ctx context.Context, id string) (store.Run, error)
	LastTurn(ctx context.Context, runID string) (store.Turn, bool, error)
	UseRetryGrant(ctx context.Context, call store.ToolCall) (store.ToolCall, bool, error)
}

// LoadPolicy reads the run's stored policy; a run without one gets the
// default: everything not read-only is asked, held approvals.DefaultHold.
func LoadPolicy(ctx context.Context, st Store, runID string) (approvals.Policy, error) {
	raw, err := st.RunPolicy(ctx, runID)
	if err != nil {
		return approvals.Policy{}, err
	}
	if raw == nil {
		return approvals.Policy{Hold: approvals.DefaultHold}, nil
	}
	var p approvals.Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		return approvals.Policy{}, fmt.Errorf("the approvals policy of run %s: %w", runID, err)
	}
	return p, nil
}

// Verdict is the hook's answer for one call.
type Verdict struct {
	// Decision is "allow", "deny", "defer", or "" (no decision: the CLI's
	// own rules apply).
	Decision string
	// Reason is told to the model with a refusal.
	Reason string
	// UpdatedInput replaces the call's input when allowed.
	UpdatedInput json.RawMessage
}

// Hook output decisions.
const (
	HookAllow = "allow"
	HookDeny  = "deny"
	HookDefer = "defer"
)

// JSON is the hook's stdout for v (empty for no decision).
func (v Verdict) JSON() []byte {
	if v.Decision == "" {
		return nil
	}
	out := map[string]any{"hookEventName": "PreToolUse", "permissionDecision": v.Decision}
	if v.Reason != "" {
		out["permissionDecisionReason"] = v.Reason
	}
	if v.Decision == HookAllow && len(v.UpdatedInput) > 0 {
		out["updatedInput"] = v.UpdatedInput
	}
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": out})
	return append(b, '\n')
}

// Interrupted is the reason given when the CLI asks again about a call
// whose decision was handed out before: at most once, never twice.
const Interrupted = "this call was already decided and handed to an earlier process of this session, which stopped while it ran; the orchestrator does not run it twice: check its effect before trying again"

// Gate is the outcome of Gate.
type Gate struct {
	Verdict Verdict
	// SetID is the question set a person is asked (Verdict empty).
	SetID string
	// Pass: the policy leaves the call to the CLI.
	Pass bool
}

// GateCall decides a tool call of run: a decision stored for its
// tool_use_id (handed out once); else the policy and the rules allowed for
// the run, recorded as the call's decision; else a question set is stored
// (AskTool, live says whether a process waits) and returned to wait on.
func GateCall(ctx context.Context, st Store, runID string, call questions.ToolCall, live bool) (Gate, error) {
	if call.ToolUseID == "" {
		return Gate{}, errors.New("tool call without a tool_use_id")
	}
	if g, ok, err := take(ctx, st, call.ToolUseID); err != nil || ok {
		return g, err
	}
	setID, pass, err := prepare(ctx, st, runID, call, live, false)
	if err != nil {
		return Gate{}, err
	}
	if pass {
		return Gate{Pass: true}, nil
	}
	if setID != "" {
		return Gate{SetID: setID}, nil
	}
	g, _, err := take(ctx, st, call.ToolUseID)
	return g, err
}

// AskIfNeeded is the run loop's side of GateCall: when the policy leaves the
// call to a person, its question set is stored (or found: the hook may have
// been first) and its ID returned while it is pending; a decision by the
// policy is recorded, never handed out (that is the hook's).
func AskIfNeeded(ctx context.Context, st Store, runID string, call questions.ToolCall, live bool) (string, error) {
	setID, _, err := prepare(ctx, st, runID, call, live, false)
	return setID, err
}

// AskForced is AskIfNeeded for a call the CLI itself asks permission for
// (can_use_tool): a call the policy would leave to the CLI is asked too.
func AskForced(ctx context.Context, st Store, runID string, call questions.ToolCall) (string, error) {
	setID, _, err := prepare(ctx, st, runID, call, true, true)
	return setID, err
}

// prepare records the policy's decision for call, or stores its question
// set; setID is the set while it is pending; pass is true when the policy
// leaves the call to the CLI (and force is false).
func prepare(ctx context.Context, st Store, runID string, call questions.ToolCall, live, force bool) (setID string, pass bool, err error) {
	p, err := LoadPolicy(ctx, st, runID)
	if err != nil {
		return "", false, err
	}
	rules, err := st.RunRules(ctx, runID)
	if err != nil {
		return "", false, err
	}
	d := p.Decide(call.Tool, call.Input)
	if d.Action == approvals.ActionAsk && call.Tool != approvals.AskUserQuestion {
		for _, r := range rules {
			if approvals.AllowedForRun(r, call.Tool, call.Input) {
				d = approvals.Decision{Action: approvals.ActionAllow, Rule: "allowed for this run (a person allowed this very call)"}
				break
			}
		}
	}
	if d.Action == approvals.ActionPass && force {
		d.Action = approvals.ActionAsk
	}
	kind := questions.KindApproval
	if call.Tool == approvals.AskUserQuestion {
		kind = questions.KindAskTool
	}
	rec := store.ToolCall{ToolUseID: call.ToolUseID, RunID: runID, Kind: kind, Tool: call.Tool, Input: call.Input}
	if d.Action == approvals.ActionAsk && kind == questions.KindApproval {
		// The same call, allowed by a person while its process died: the
		// model makes it again, and it runs once without asking again.
		if _, ok, err := st.UseRetryGrant(ctx, rec); err != nil || ok {
			return "", false, err
		}
	}
	switch d.Action {
	case approvals.ActionPass:
		return "", true, nil
	case approvals.ActionAllow, approvals.ActionDeny:
		rec.Decision, rec.DecidedBy = string(d.Action), "policy: "+d.Rule
		if d.Action == approvals.ActionDeny {
			rec.Reason = fmt.Sprintf("the orchestrator's policy denies this call (rule %s)", d.Rule)
		}
		_, err := st.DecideTool(ctx, rec)
		return "", false, err
	}
	run, err := st.Run(ctx, runID)
	if err != nil {
		return "", false, err
	}
	turn := 0
	if t, ok, err := st.LastTurn(ctx, runID); err != nil {
		return "", false, err
	} else if ok {
		turn = t.Seq
	}
	var set questions.Set
	if kind == questions.KindAskTool {
		set, err = questions.AskToolSet(runID, turn, call)
		if err != nil {
			// Nobody can answer a malformed question: the model is told why.
			rec.Decision, rec.DecidedBy, rec.Reason = store.DecisionDeny, "orchestrator", err.Error()
			_, err := st.DecideTool(ctx, rec)
			return "", false, err
		}
	} else {
		set = questions.ApprovalSet(runID, turn, call)
	}
	set.Title = run.Title
	c, _, err := st.AskTool(ctx, rec, set, run.Surfaces, live)
	if err != nil {
		return "", false, err
	}
	if c.Decision != "" || c.SetID == "" {
		return "", false, nil
	}
	return c.SetID, false, nil
}

// take hands out a stored decision; ok is false when there is none yet.
func take(ctx context.Context, st Store, toolUseID string) (Gate, bool, error) {
	c, t, err := st.TakeToolDecision(ctx, toolUseID)
	if err != nil {
		return Gate{}, false, err
	}
	switch t {
	case store.TakeFirst:
		v := Verdict{Decision: c.Decision, Reason: c.Reason}
		if c.Decision == store.DecisionAllow {
			v.UpdatedInput = c.UpdatedInput
			v.Reason = "allowed by " + c.DecidedBy
		}
		return Gate{Verdict: v}, true, nil
	case store.TakeAgain:
		return Gate{Verdict: Verdict{Decision: HookDeny, Reason: Interrupted}}, true, nil
	}
	return Gate{}, false, nil
}

// HookInput is what the CLI writes to a PreToolUse hook's stdin
// (docs/claude-cli.md).
type HookInput struct {
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	SessionID     string          `json:"session_id"`
}

// ParseHookInput reads and checks the hook's input.
func ParseHookInput(b []byte) (HookInput, error) {
	var in HookInput
	if err := json.Unmarshal(b, &in); err != nil {
		return HookInput{}, fmt.Errorf("hook input is not a JSON object: %w", err)
	}
	switch {
	case in.HookEventName != "" && in.HookEventName != "PreToolUse":
		return HookInput{}, fmt.Errorf("hook input: event %q, want PreToolUse", in.HookEventName)
	case in.ToolName == "":
		return HookInput{}, errors.New("hook input: no tool_name")
	case in.ToolUseID == "":
		return HookInput{}, errors.New("hook input: no tool_use_id")
	}
	return in, nil
}

// Hook is the orchestrator's PreToolUse hook for one call of run: the
// stored decision, the policy's, or — once a person is asked — the answer
// given within the policy's hold; past the hold the call is deferred (the
// turn ends, the run waits with no process) and resuming the session fires
// the hook again, which then hands out the answer.
func Hook(ctx context.Context, st Store, runID string, in HookInput) (Verdict, error) {
	call := questions.ToolCall{ToolUseID: in.ToolUseID, Tool: in.ToolName, Input: in.ToolInput}
	p, err := LoadPolicy(ctx, st, runID)
	if err != nil {
		return Verdict{}, err
	}
	g, err := GateCall(ctx, st, runID, call, p.Hold > 0)
	if err != nil || g.SetID == "" {
		return g.Verdict, err
	}
	if p.Hold > 0 {
		wctx, cancel := context.WithTimeout(ctx, p.Hold)
		err := waitAnswered(wctx, st, g.SetID, in.ToolUseID)
		cancel()
		if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
			err = nil // the hold is over
		}
		if err != nil {
			return Verdict{}, err
		}
		if g, ok, err := take(ctx, st, in.ToolUseID); err != nil || ok {
			return g.Verdict, err
		}
	}
	if err := st.MarkToolDeferred(ctx, in.ToolUseID); err != nil {
		return Verdict{}, err
	}
	return Verdict{Decision: HookDefer}, nil
}

// parkCheck is how often the hook, while it holds the CLI, checks that the
// run loop parked the call early (no surface of its process can take an
// answer). The answer itself wakes the hook at once: store.WaitSet is woken
// by the poke every commit that ends a wait leaves for other processes.
const parkCheck = 250 * time.Millisecond

// waitAnswered returns once the set is no longer pending, the call was
// parked early (nil), or ctx ends.
func waitAnswered(ctx context.Context, st Store, setID, toolUseID string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := st.WaitSet(ctx, setID)
		answered <- err
	}()
	tick := time.NewTicker(parkCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-answered:
			return err
		case <-tick.C:
			if c, err := st.ToolCall(ctx, toolUseID); err == nil && c.Deferred {
				return nil
			}
		}
	}
}
