package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/approvals/gate"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestHookFencing: the hook of a CLI started under a take of the run's
// lock (--fence) records each call it lets run before it runs, refuses a
// call an earlier process of the session started (its outcome unknown),
// records the call's output (PostToolUse), and refuses every call once
// the lock was taken again: a fenced-out CLI runs nothing more.
func TestHookFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := t.TempDir()
	st, err := store.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRunPolicy(ctx, "r1", approvals.Policy{Allow: []string{"Bash"}}.Encode()); err != nil {
		t.Fatal(err)
	}
	lock, err := st.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	fence := lock.Token()
	hook := func(fence int64, post bool, input string) (decision, reason string) {
		t.Helper()
		tm := newTestMain(t)
		tm.Stdin = strings.NewReader(input)
		if post {
			err = tm.runPostHook(ctx, state, "r1", fence)
		} else {
			err = tm.runHook(ctx, state, "r1", fence)
		}
		if err != nil {
			t.Fatal(err)
		}
		if tm.stdout.Len() == 0 {
			return "", ""
		}
		var out struct {
			HookSpecificOutput struct {
				PermissionDecision       string `json:"permissionDecision"`
				PermissionDecisionReason string `json:"permissionDecisionReason"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(tm.stdout.Bytes(), &out); err != nil {
			t.Fatalf("hook output %q: %v", tm.stdout.String(), err)
		}
		return out.HookSpecificOutput.PermissionDecision, out.HookSpecificOutput.PermissionDecisionReason
	}
	call := func(id string) string {
		return `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_use_id":"` + id + `","session_id":"s"}`
	}
	if d, r := hook(fence, false, call("toolu_1")); d != gate.HookAllow {
		t.Fatalf("the current take's call: %q (%s), want allow", d, r)
	}
	if d, r := hook(fence, false, call("toolu_1")); d != gate.HookDeny || !strings.Contains(r, "does not run it twice") {
		t.Fatalf("the same call again: %q (%s), want deny, not run twice", d, r)
	}
	// A call the policy leaves to the CLI (read-only) has no decision to
	// hand out once: the record of its start keeps it from running twice.
	read := `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/x"},"tool_use_id":"toolu_r","session_id":"s"}`
	if d, r := hook(fence, false, read); d != "" {
		t.Fatalf("a read-only call: %q (%s), want no decision (the CLI's)", d, r)
	}
	if d, r := hook(fence, false, read); d != gate.HookDeny || !strings.Contains(r, "outcome is unknown") {
		t.Fatalf("the same read-only call again: %q (%s), want deny, its outcome unknown", d, r)
	}
	if d, _ := hook(fence, true, `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_use_id":"toolu_1","tool_response":{"stdout":"hi","stderr":""}}`); d != "" {
		t.Fatalf("PostToolUse decided %q, want nothing", d)
	}
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := st.LockRun("r1")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Unlock()
	if d, r := hook(fence, false, call("toolu_2")); d != gate.HookDeny || !strings.Contains(r, "no longer drives the run") {
		t.Fatalf("a fenced-out CLI's call: %q (%s), want deny", d, r)
	}
	calls, err := st.ToolCallsOf(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].ToolUseID != "toolu_1" || !calls[0].Finished || calls[0].Result != "hi" || calls[0].Input != "echo hi" ||
		calls[1].ToolUseID != "toolu_r" || calls[1].Finished {
		t.Fatalf("recorded calls %+v, want toolu_1 finished with its output, toolu_r started", calls)
	}
	// Without a fencing token (a CLI of a process that holds none) nothing
	// is recorded: the policy alone decides.
	if d, _ := hook(0, false, call("toolu_3")); d != gate.HookAllow {
		t.Fatalf("without a token: %q, want allow", d)
	}
	if calls, _ := st.ToolCallsOf(ctx, "r1"); len(calls) != 2 {
		t.Fatalf("without a token the call was recorded: %+v", calls)
	}
}
