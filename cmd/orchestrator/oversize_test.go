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
