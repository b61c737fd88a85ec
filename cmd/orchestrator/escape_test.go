package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// hostile is model text that would take over a terminal: a window title, a
// clear screen, hidden text, a hyperlink, a right-to-left override.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[8mhidden\x1b[0m \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \u202egnp.exe"

// TestEscapeBytesFromTheModelNeverReachTheTerminal: the real CLI, a model
// that writes escape sequences and bidi controls in its text, its question
// and its title-bearing output; neither `run` (plain and --json) nor
// `status` (table and --json) prints them.
func TestEscapeBytesFromTheModelNeverReachTheTerminal(t *testing.T) {
	t.Parallel()
	q := `<!--QUESTION:{"questions":[{"question":"Pick \u001b]0;t\u0007\u001b[2J\u202e one","header":"H\u001b[31m","options":[` +
		`{"label":"A\u001b[8m","description":"d\u202e"},{"label":"B"}]}]}-->`
	e := newE2E(t,
		fakeapi.Rule{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Plan: " + hostile + "\n" + q}},
		fakeapi.Rule{When: answerRule, Reply: fakeapi.Reply{Text: "Done " + hostile}},
	)
	check := func(what, out string) {
		t.Helper()
		for _, bad := range []string{"\x1b]0;", "\x1b[2J", "\x1b[8m", "\x1b]8;", "\u202e", "\x07"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s prints %q:\n%q", what, bad, out)
			}
		}
	}
	code, out, errs := e.run("", "run", "--prompt", "Implement spec X")
	if code != exitWaiting {
		t.Fatalf("run exit %d, want %d", code, exitWaiting)
	}
	check("run", out+errs)
	if !strings.Contains(out, "hidden") || !strings.Contains(out, "link") {
		t.Errorf("the text around the escapes is gone:\n%s", out)
	}
	code, out, errs = e.run("", "status")
	if code != 0 || !strings.Contains(out, "Pick") {
		t.Fatalf("status exit %d:\n%s", code, out)
	}
	check("status", out+errs)
	code, out, errs = e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status --json exit %d", code)
	}
	check("status --json", out+errs)
	if strings.Contains(out, `\u001b`) || strings.Contains(out, `\u0007`) {
		t.Errorf("status --json carries escapes:\n%s", out)
	}
	run := e.onlyRun()
	sets := pendingOf(t, e)
	if code, _, _ := e.run("", "answer", sets, "2"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	code, out, errs = e.run("", "resume", "--json", run.ID)
	if code != 0 {
		t.Fatalf("resume exit %d", code)
	}
	check("resume --json", out+errs)
	if strings.Contains(out, `\u001b`) {
		t.Errorf("resume --json carries escapes:\n%s", out)
	}
}

// pendingOf returns the ID of the one pending question.
func pendingOf(t *testing.T, e *e2e) string {
	t.Helper()
	code, out, _ := e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var rep statusReport
	if err := jsonUnmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	p := pendingQuestions(rep.QuestionSets)
	if len(p) != 1 {
		t.Fatalf("pending = %+v", p)
	}
	return p[0].q.ID
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
