package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// limitRules keep the model calling a refused tool, so that a turn runs into
// its budget, until it is told it may go on.
func limitRules() []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "a person chose to continue", Reply: fakeapi.Reply{Text: "Finished with the extra budget."}},
		{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}},
	}
}

// TestSpecBudgetAsksOnTheTerminal: a spec's max_cost_usd reached, the
// terminal is asked whether to go on; Stop ends the run stopped (exit 4),
// Continue finishes it; status shows the spec's cost.
func TestSpecBudgetAsksOnTheTerminal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		input  string
		code   int
		status store.RunStatus
		out    string
	}{
		{"2\n", exitStopped, store.RunStopped, "stopped"},
		{"Continue\n", exitOK, store.RunDone, "Finished with the extra budget."},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, limitRules()...)
			spec := filepath.Join(e.dir, "work", "budgeted.md")
			if err := os.WriteFile(spec, []byte("---\nname: budgeted\nsurfaces: [terminal]\nmax_cost_usd: 0.001\n---\nWork on it\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, _ := e.run(tc.input, "run", spec)
			if code != tc.code {
				t.Fatalf("run exit %d, want %d", code, tc.code)
			}
			for _, want := range []string{"? The agent stopped at the run's budget: Reached maximum budget ($0.001); asking whether to go on", "Spent $0.0016 over 2 turns on budgeted; continue with another $0.001?", "Continue", "Stop", tc.out} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			// Each call of the fake costs $0.0008: the run's cost is what
			// its calls cost, not the CLI's session total per turn summed.
			wantCost := map[store.RunStatus]float64{store.RunStopped: 0.0016, store.RunDone: 0.0024}[tc.status]
			if run := e.onlyRun(); run.Status != tc.status || math.Abs(run.CostUSD-wantCost) > 1e-9 {
				t.Fatalf("run = %s $%v, want %s costing $%v", run.Status, run.CostUSD, tc.status, wantCost)
			}
			code, out, _ = e.run("", "status", "--all")
			if code != 0 || !strings.Contains(out, "budgeted") || !strings.Contains(out, string(tc.status)) {
				t.Fatalf("status exit %d; want the spec with its last status %s", code, tc.status)
			}
			if !strings.Contains(out, "SPEC      RUNS  COST") {
				t.Errorf("status lacks the per-spec cost table")
			}
		})
	}
}

// TestSpecBudgetPresetStopsAtQuestionRounds: a spec answering its budget
// question in advance (answers: {Budget: Continue}) with a model that never
// ends does not run on forever: every automatic Continue is a round of
// run.max_question_rounds, and the run never spends more than max_cost_usd
// times those rounds.
func TestSpecBudgetPresetStopsAtQuestionRounds(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "true", "description": "work"}}}})
	e.base = strings.Replace(e.base, "run:\n", "run:\n  max_question_rounds: 3\n", 1)
	e.writeConfig("")
	spec := filepath.Join(e.dir, "work", "endless.md")
	if err := os.WriteFile(spec, []byte("---\nname: endless\nsurfaces: [terminal]\nmax_cost_usd: 0.0016\nanswers:\n  Budget: Continue\n---\nWork on it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, _ := e.run("", "run", spec)
	if code == exitOK {
		t.Fatalf("run exit %d, want the run failed", code)
	}
	run := e.onlyRun()
	if run.Status != store.RunFailed || !strings.Contains(run.Error, "run.max_question_rounds 3") {
		t.Fatalf("run = %s %q, want failed at run.max_question_rounds", run.Status, run.Error)
	}
	if ceiling := 0.0016 * 3; run.CostUSD > ceiling+1e-9 {
		t.Fatalf("run spent $%v, more than max_cost_usd times run.max_question_rounds ($%v)", run.CostUSD, ceiling)
	}
	if n := len(e.fake.Requests()); n > 6 {
		t.Fatalf("the model was called %d times, want at most 6 ($0.0008 each)", n)
	}
}
