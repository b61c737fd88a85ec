package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Approvals exactly as broad as shown (issue 21), with the real CLI: the
// model, scripted to misbehave, makes a call a person allows "for this
// run", then a broader call that the old rules let through unasked.

// scriptedCalls replies to the n-th request of the conversation (counted by
// the tool results it carries) with the n-th call, then a final text with
// every tool result.
// The calls are set once the test knows its paths.
func scriptedCalls(script *atomic.Pointer[[]*fakeapi.ToolUse]) fakeapi.Rule {
	return fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
		var calls []*fakeapi.ToolUse
		if p := script.Load(); p != nil {
			calls = *p
		}
		n := 0
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					n++
				}
			}
		}
		if n < len(calls) {
			return fakeapi.Reply{Text: "Next step.", ToolUse: calls[n]}
		}
		return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
	}}
}

func bashCall(cmd string) *fakeapi.ToolUse {
	return &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": cmd, "description": "Tidy up"}}
}

// TestAllowForRunIsExactlyTheCall: "Allow for this run" on `rm -f
// junk/*.tmp`, on `ls build:*` and on a Write of a.txt allows those very
// calls again without a question, and nothing more: the chained commands
// and the Write elsewhere are asked (and denied here). A command whose
// dangerous first line is followed by 4 KiB of comments shows that line.
func TestAllowForRunIsExactlyTheCall(t *testing.T) {
	t.Parallel()
	var script atomic.Pointer[[]*fakeapi.ToolUse]
	e := newE2E(t, scriptedCalls(&script))
	work := filepath.Join(e.dir, "work")
	for _, d := range []string{filepath.Join(work, "junk"), filepath.Join(work, "build"), filepath.Join(e.dir, "outside")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "junk", "x.tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(e.dir, "outside", "authorized_keys")
	hidden := "touch hidden_ran.txt\n" + strings.Repeat("# only a comment, nothing to see here, keep scrolling\n", 90) + "echo done"
	calls := []*fakeapi.ToolUse{
		bashCall("rm -f junk/*.tmp"),                          // asked: Allow for this run
		bashCall("rm -f junk/*.tmp"),                          // the same call: not asked
		bashCall("rm -f junk/x.tmp; echo PWNED >> pwned.txt"), // asked: Deny
		bashCall("ls build:*"),                                // asked: Allow for this run
		bashCall("ls build ; echo PWNED2 > pwned2.txt"),       // asked: Deny
		{Name: "Write", Input: map[string]any{"file_path": filepath.Join(work, "a.txt"), "content": "a\n"}}, // asked: Allow for this run
		{Name: "Write", Input: map[string]any{"file_path": keys, "content": "ssh-ed25519 AAAA attacker\n"}}, // asked: Deny
		bashCall(hidden), // asked: Deny
	}
	script.Store(&calls)
	answers := "Allow for this run\nDeny\nAllow for this run\nDeny\nAllow for this run\nDeny\nDeny\n"
	code, out, _ := e.run(answers, "run", "--prompt", "tidy the workspace", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, f := range []string{filepath.Join(work, "pwned.txt"), filepath.Join(work, "pwned2.txt"), keys, filepath.Join(work, "hidden_ran.txt")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was made without a person allowing it", filepath.Base(f))
		}
	}
	if _, err := os.Stat(filepath.Join(work, "a.txt")); err != nil {
		t.Errorf("the allowed Write did not run: %v", err)
	}
	if n := strings.Count(out, "to run this?"); n != 7 {
		t.Errorf("asked %d times, want 7 (the repeated call unasked, every broader one asked)", n)
	}
	for _, want := range []string{"echo PWNED >> pwned.txt", "echo PWNED2 > pwned2.txt", "authorized_keys",
		"touch hidden_ran.txt", "characters cut …", "orchestrator show "} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q", want)
		}
	}
	run := e.onlyRun()
	if run.Status != store.RunDone {
		t.Errorf("run %s: %s", run.ID, run.Status)
	}
	// The whole call is where the terminal says it is.
	code, shown, _ := e.run("", "show", run.ID)
	if code != 0 || !strings.Contains(shown, "touch hidden_ran.txt") || !strings.Contains(shown, "echo done") ||
		strings.Count(shown, "# only a comment") < 90 {
		t.Errorf("show does not print the whole call:\n%s", shown)
	}
	rules, err := e.store().RunRules(t.Context(), run.ID)
	if err != nil || len(rules) != 3 {
		t.Fatalf("rules %q %v", rules, err)
	}
	for _, r := range rules {
		if !strings.HasPrefix(r, "exact:") {
			t.Errorf("rule %q is not the exact call", r)
		}
	}
}

// TestJSONToolInputPrintable: status --json and show --json carry a tool
// call's input with its escape sequences made printable.
func TestJSONToolInputPrintable(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		fakeapi.Rule{When: "say hi", Reply: fakeapi.Reply{Text: "Running it.", ToolUse: bashCall("echo \x1b]0;pwned\x07\x1b[2Jhi")}, Times: 1},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Done."}})
	if code, _, _ := e.run("", "run", "--prompt", "say hi", "--surface", "terminal"); code != exitWaiting {
		t.Fatalf("exit %d, want %d", code, exitWaiting)
	}
	run := e.onlyRun()
	for _, args := range [][]string{{"status", "--json"}, {"show", "--json", run.ID}} {
		code, out, _ := e.run("", args...)
		if code != 0 {
			t.Fatalf("%s exit %d", args[0], code)
		}
		if strings.Contains(out, `\u001b`) || strings.Contains(out, `\u0007`) || strings.Contains(out, "\x1b") {
			t.Errorf("%s carries escapes:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `"command": "echo hi"`) {
			t.Errorf("%s does not carry the input:\n%s", strings.Join(args, " "), out)
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("%s is not JSON", args[0])
		}
	}
}

// TestConfiguredRuleAllowsEachPartOnly: a configured Bash(ls build:*)
// allows `ls build`, never `ls build ; echo PWNED2 > f`: that is asked
// (here nobody answers: the run parks with nothing run).
func TestConfiguredRuleAllowsEachPartOnly(t *testing.T) {
	t.Parallel()
	var script atomic.Pointer[[]*fakeapi.ToolUse]
	calls := []*fakeapi.ToolUse{bashCall("ls build"), bashCall("ls build ; echo PWNED2 > pwned2.txt")}
	script.Store(&calls)
	e := newE2E(t, scriptedCalls(&script))
	if err := os.MkdirAll(filepath.Join(e.dir, "work", "build"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.writeConfig("\napprovals:\n  allow: [\"Bash(ls build:*)\"]\n")
	code, out, _ := e.run("", "run", "--prompt", "list the build", "--surface", "terminal")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d (the chained command waits for a person):\n%s", code, exitWaiting, out)
	}
	if n := strings.Count(out, "to run this?"); n != 1 || !strings.Contains(out, "echo PWNED2") {
		t.Errorf("asked %d times, want once, about the chained command:\n%s", n, out)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "work", "pwned2.txt")); err == nil {
		t.Error("the chained command ran")
	}
}
