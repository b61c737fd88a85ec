package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestSkippedOversizeLineIsReported: a line of the CLI's output longer than
// agent.max_line_bytes (here a tool call with a 200 KB input) is skipped,
// and `run` says so, in its plain output and in its NDJSON.
func TestSkippedOversizeLineIsReported(t *testing.T) {
	t.Parallel()
	rules := []fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Looking.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "true", "description": strings.Repeat("long ", 40<<10)}}}},
	}
	e := newE2E(t, rules...)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  max_line_bytes: 64KiB\n", 1)
	e.writeConfig("")
	code, out, _ := e.run("", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "skipped lines of the CLI's output: 1 over agent.max_line_bytes") || !strings.Contains(out, "line ") {
		t.Errorf("run does not report the skipped line:\n%s", out)
	}
	code, out, _ = e.run("", "run", "--json", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var skipped int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev jsonEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == evTurnFinished && ev.Turn.Outcome != nil {
			skipped += ev.Turn.Outcome.SkippedLines.Oversize
			if ev.Turn.Outcome.SkippedLines.Oversize > 0 && len(ev.Turn.Outcome.SkippedLines.Details) == 0 {
				t.Errorf("no details of the skipped line: %s", l)
			}
		}
	}
	if skipped == 0 {
		t.Errorf("run --json does not report the skipped line:\n%s", out)
	}
}

// TestOversizeLineShownWithItsFirstBytes: run's output, its NDJSON and
// show say how a skipped oversize line began, made printable, so that one
// can tell what was lost.
func TestOversizeLineShownWithItsFirstBytes(t *testing.T) {
	t.Parallel()
	rules := []fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Looking.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "true", "description": "\x1b[31m" + strings.Repeat("long ", 40<<10)}}}},
	}
	e := newE2E(t, rules...)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  max_line_bytes: 64KiB\n", 1)
	e.writeConfig("")
	code, out, _ := e.run("", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, `it began: {"type":"assistant"`) || !strings.Contains(out, "…") {
		t.Errorf("run does not show how the skipped line began:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("run prints an escape sequence of the CLI's output:\n%q", out)
	}
	run := e.onlyRun()
	code, out, _ = e.run("", "show", run.ID)
	if code != 0 || !strings.Contains(out, `⚠ skipped line `) || !strings.Contains(out, `it began: {"type":"assistant"`) {
		t.Errorf("show exit %d, does not show the skipped line:\n%s", code, out)
	}
	code, out, _ = e.run("", "run", "--json", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev jsonEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == evTurnFinished && ev.Turn.Outcome != nil {
			if f := ev.Turn.Outcome.SkippedLines.FirstOversize; f != nil {
				found = f.Line > 0 && f.Bytes > 64<<10 && strings.HasPrefix(f.Prefix, `{"type":"assistant"`)
			}
		}
	}
	if !found {
		t.Errorf("run --json has no first_oversize with the line's first bytes:\n%s", out)
	}
}
