package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func newStore(t *testing.T, p approvals.Policy) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunPolicy(ctx, "r1", p.Encode()); err != nil {
		t.Fatal(err)
	}
	return st
}

func bash(cmd string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return b
}

func hookIn(id, cmd string) HookInput {
	return HookInput{HookEventName: "PreToolUse", ToolName: "Bash", ToolUseID: id, ToolInput: bash(cmd)}
}

func TestHookPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, approvals.Policy{Allow: []string{"Bash(go test:*)"}, Deny: []string{"Bash(rm:*)"}, Preallowed: []string{"Bash(ls)"}})
	v, err := Hook(ctx, st, "r1", hookIn("t1", "go test ./..."))
	if err != nil || v.Decision != HookAllow {
		t.Errorf("allow: %+v %v", v, err)
	}
	v, err = Hook(ctx, st, "r1", hookIn("t2", "rm -rf /"))
	if err != nil || v.Decision != HookDeny || !strings.Contains(v.Reason, "Bash(rm:*)") {
		t.Errorf("deny: %+v %v", v, err)
	}
	v, err = Hook(ctx, st, "r1", hookIn("t3", "ls"))
	if err != nil || v.Decision != "" || v.JSON() != nil {
		t.Errorf("preallowed: %+v %v", v, err)
	}
	// The same call again (its process died after the hook): never twice.
	v, err = Hook(ctx, st, "r1", hookIn("t1", "go test ./..."))
	if err != nil || v.Decision != HookDeny || v.Reason != Interrupted {
		t.Errorf("again: %+v %v", v, err)
	}
	if sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: "r1"}); len(sets) != 0 {
		t.Errorf("the policy asked people: %d sets", len(sets))
	}
}

// TestHookParksThenAnswers: with hold 0 the call is deferred at once and the
// run waits; the answer given meanwhile is what the hook hands out when the
// resumed session fires it again, once.
func TestHookParksThenAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, approvals.Policy{Hold: 0})
	v, err := Hook(ctx, st, "r1", hookIn("t1", "touch x"))
	if err != nil || v.Decision != HookDefer {
		t.Fatalf("park: %+v %v", v, err)
	}
	c, err := st.ToolCall(ctx, "t1")
	if err != nil || !c.Deferred || c.Kind != questions.KindApproval {
		t.Fatalf("stored %+v %v", c, err)
	}
	run, _ := st.Run(ctx, "r1")
	if run.Status != store.RunWaiting {
		t.Errorf("run %s", run.Status)
	}
	rec, err := st.QuestionSet(ctx, c.SetID)
	if err != nil || !strings.Contains(rec.Set.Context, "touch x") {
		t.Fatalf("set %+v %v", rec.Set, err)
	}
	// Fired again before an answer: deferred again.
	if v, _ := Hook(ctx, st, "r1", hookIn("t1", "touch x")); v.Decision != HookDefer {
		t.Errorf("before the answer: %+v", v)
	}
	a, _ := questions.ParseQuestionAnswer(rec.Set.Questions[0], "Deny: not today")
	if _, err := st.RecordAnswer(ctx, questions.Response{SetID: c.SetID, Answers: []questions.Answer{a}, By: "bob", Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	v, err = Hook(ctx, st, "r1", hookIn("t1", "touch x"))
	if err != nil || v.Decision != HookDeny || v.Reason != "not today" {
		t.Errorf("answered: %+v %v", v, err)
	}
	var out struct {
		H struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(v.JSON(), &out); err != nil || out.H.Decision != "deny" || out.H.Reason != "not today" {
		t.Errorf("hook output %s", v.JSON())
	}
}

// TestHookLiveAnswer: within the hold, the hook waits for the answer and
// hands it out; "Allow for this run" then allows the same command without
// asking.
func TestHookLiveAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, approvals.Policy{Hold: time.Minute})
	go func() {
		for {
			sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: "r1"})
			if len(sets) == 1 {
				a, _ := questions.ParseQuestionAnswer(sets[0].Set.Questions[0], "Allow for this run")
				_, _ = st.RecordAnswer(ctx, questions.Response{SetID: sets[0].Set.ID, Answers: []questions.Answer{a}, By: "bob", Surface: "cli"})
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	v, err := Hook(ctx, st, "r1", hookIn("t1", "make deploy"))
	if err != nil || v.Decision != HookAllow {
		t.Fatalf("live: %+v %v", v, err)
	}
	v, err = Hook(ctx, st, "r1", hookIn("t2", "make deploy"))
	if err != nil || v.Decision != HookAllow || !strings.Contains(v.Reason, "allowed for this run") {
		t.Errorf("second identical call: %+v %v", v, err)
	}
	if sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: "r1"}); len(sets) != 1 {
		t.Errorf("asked %d times", len(sets))
	}
	// Anything more than the very call is asked again.
	g, err := GateCall(ctx, st, "r1", questions.ToolCall{ToolUseID: "t3", Tool: "Bash", Input: json.RawMessage(`{"command":"make deploy; touch x"}`)}, false)
	if err != nil || g.SetID == "" {
		t.Errorf("a longer command after \"Allow for this run\": %+v %v", g, err)
	}
}

func TestHookAskUserQuestionAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, approvals.Policy{Hold: 0})
	in := HookInput{ToolName: "AskUserQuestion", ToolUseID: "q1", ToolInput: json.RawMessage(`{"questions":[{"question":"Which?","options":[{"label":"A"},{"label":"B"}]}]}`)}
	if v, _ := Hook(ctx, st, "r1", in); v.Decision != HookDefer {
		t.Fatalf("park: %+v", v)
	}
	c, _ := st.ToolCall(ctx, "q1")
	rec, _ := st.QuestionSet(ctx, c.SetID)
	if rec.Set.Kind != questions.KindAskTool {
		t.Errorf("kind %q", rec.Set.Kind)
	}
	a, _ := questions.ParseQuestionAnswer(rec.Set.Questions[0], "B")
	if _, err := st.RecordAnswer(ctx, questions.Response{SetID: c.SetID, Answers: []questions.Answer{a}, By: "bob", Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	v, err := Hook(ctx, st, "r1", in)
	if err != nil || v.Decision != HookAllow || !strings.Contains(string(v.UpdatedInput), `"answers":{"Which?":"B"}`) {
		t.Errorf("%+v %v", v, err)
	}
	bad := HookInput{ToolName: "AskUserQuestion", ToolUseID: "q2", ToolInput: json.RawMessage(`{"questions":[]}`)}
	if v, _ := Hook(ctx, st, "r1", bad); v.Decision != HookDeny || !strings.Contains(v.Reason, "no questions") {
		t.Errorf("malformed AskUserQuestion: %+v", v)
	}
}

func TestParseHookInput(t *testing.T) {
	for _, bad := range []string{`nope`, `{}`, `{"tool_name":"Bash"}`, `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_use_id":"x"}`} {
		if _, err := ParseHookInput([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestParseHookInputRecorded reads what the real CLI wrote to a hook.
func TestParseHookInputRecorded(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "executor", "testdata", "claude-code-2.1.330", "defer_hook_input_ask.json"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ParseHookInput(b)
	if err != nil || in.ToolName != "AskUserQuestion" || in.ToolUseID != "toolu_fake_d3af98132f97abe98ecf1a8e" || !strings.Contains(string(in.ToolInput), "Which auth method") {
		t.Errorf("%+v %v", in, err)
	}
}

// TestHookAllowsTheCallMadeAgainAfterACrash: an approval answered Allow
// once after its process died (RetryToolCall) lets the model's identical
// call through once, without a question; a different call, or the same
// call a second time, is asked.
func TestHookAllowsTheCallMadeAgainAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t, approvals.Policy{}) // held 0: a call nobody decided is deferred
	v, err := Hook(ctx, st, "r1", hookIn("t1", "echo ran >> x"))
	if err != nil || v.Decision != HookDefer {
		t.Fatalf("first call: %+v %v", v, err)
	}
	c, _ := st.ToolCall(ctx, "t1")
	rec, err := st.QuestionSet(ctx, c.SetID)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := questions.ParseQuestionAnswer(rec.Set.Questions[0], "Allow once")
	if _, err := st.RecordAnswer(ctx, questions.Response{SetID: rec.Set.ID, Answers: []questions.Answer{a}, By: "alice", Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, granted, err := st.RetryToolCall(ctx, "t1"); err != nil || !granted {
		t.Fatalf("RetryToolCall: %v %v", granted, err)
	}
	if v, err := Hook(ctx, st, "r1", hookIn("t2", "echo other >> x")); err != nil || v.Decision != HookDefer {
		t.Fatalf("another call: %+v %v; want it asked", v, err)
	}
	if v, err := Hook(ctx, st, "r1", hookIn("t3", "echo ran >> x")); err != nil || v.Decision != HookAllow || !strings.Contains(v.Reason, "alice") {
		t.Fatalf("the call made again: %+v %v; want allowed by alice", v, err)
	}
	if v, err := Hook(ctx, st, "r1", hookIn("t4", "echo ran >> x")); err != nil || v.Decision != HookDefer {
		t.Fatalf("the call made a third time: %+v %v; want it asked", v, err)
	}
}
