package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestJSONGoldenShow: show --json prints the run and its turns in the
// shapes of the other outputs (a run, turns with outcomes and tools), the
// decision log and the refused tool calls.
func TestJSONGoldenShow(t *testing.T) {
	t.Parallel()
	e := newJSONE2E(t, standardRules(0)...)
	if code, _, _ := e.run("2\n", "run", "--prompt", "Implement spec X"); code != 0 {
		t.Fatalf("run exit %d", code)
	}
	run := e.onlyRun()
	code, out, _ := e.run("", "show", "--json", run.ID)
	if code != 0 {
		t.Fatalf("show exit %d", code)
	}
	noSecret(t, out)
	var got showOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Run.ID != run.ID || got.Run.Status != "done" || len(got.Timeline) != 2 || got.Timeline[0].Outcome == nil ||
		got.Timeline[0].AskedSet == "" || got.Timeline[1].SetID != got.Timeline[0].AskedSet || len(got.Decisions) != 1 {
		t.Errorf("show --json = %s", out)
	}
	golden(t, "show", normaliseJSON(t, out))
}

// deniedRules: the model runs `touch made_by_tool.txt` with Bash, which
// the CLI refuses (no allowed_tools, default permission mode), then says
// it could not.
func deniedRules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "needs approval", Reply: fakeapi.Reply{Text: "I could not create the file."}},
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Creating the file.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "touch made_by_tool.txt", "description": "Create the file"}}}},
		{Reply: fakeapi.Reply{Text: "Done."}},
	}
}

// TestDeniedToolCallsAreListed: a run whose Bash call the CLI refused
// "succeeds", and its summary says what was refused: at the end of run's
// output, in show and in show --json.
func TestDeniedToolCallsAreListed(t *testing.T) {
	t.Parallel()
	e := newE2E(t, deniedRules()...)
	code, out, _ := e.run("", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("run exit %d", code)
	}
	tail := out[strings.Index(out, "✔ run "):]
	if !strings.Contains(tail, "the CLI refused 1 tool call(s) in this run") || !strings.Contains(tail, "Bash: touch made_by_tool.txt (turn 1)") {
		t.Errorf("run's summary does not list the refused call:\n%s", out)
	}
	run := e.onlyRun()
	code, out, _ = e.run("", "show", run.ID)
	if code != 0 || !strings.Contains(out, "the CLI refused 1 tool call(s)") || !strings.Contains(out, "⚙ Bash: touch made_by_tool.txt (refused by the CLI)") {
		t.Errorf("show exit %d, does not list the refused call:\n%s", code, out)
	}
	code, out, _ = e.run("", "show", "--json", run.ID)
	var got showOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("show --json: exit %d, %v", code, err)
	}
	if len(got.Refused) != 1 || got.Refused[0].Name != "Bash" || got.Refused[0].Summary != "touch made_by_tool.txt" || got.Refused[0].Turn != 1 {
		t.Errorf("show --json refused = %+v", got.Refused)
	}
	if oc := got.Timeline[0].Outcome; oc == nil || len(oc.PermissionDenials) != 1 || oc.PermissionDenials[0] != "Bash" {
		t.Errorf("turn 1's outcome lacks the denial: %s", out)
	}
}
