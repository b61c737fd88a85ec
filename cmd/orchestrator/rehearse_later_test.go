package main

import (
	"strings"
	"testing"
)

// TestRehearseSuggestsNoCommandThatCannotWork: a rehearsal whose input
// closes before the answer ends waiting (exit 3) with its store removed:
// it suggests no `orchestrator answer` or `resume` (they would find
// nothing), and says to rehearse again. Real CLI, scripted model.
func TestRehearseSuggestsNoCommandThatCannotWork(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	code, out, errs := e.run("", "rehearse", "--prompt", "Add a login page")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitWaiting, out, errs)
	}
	for _, bad := range []string{"orchestrator answer", "orchestrator resume", "Answer them later"} {
		if strings.Contains(out+errs, bad) {
			t.Errorf("the rehearsal suggests %q, which cannot work once it ends:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "rehearse again") {
		t.Errorf("the rehearsal does not say to rehearse again:\n%s", out)
	}
}
