package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestTwoProcessesAtACapThatFitsOneTurn: with the real CLI, two
// `orchestrator run` processes of a spec whose daily cap is one turn's
// cost: the first one's turn reserves the whole cap as it begins (its
// agent then runs a command that waits until the test lets it go, so the
// two runs surely overlap); the second, started meanwhile, starts no agent
// and waits for it. The first spends the cap; the second then asks the
// spend cap question (exit 3, its terminal has no input). Without the
// reservation it would have been given the same budget.
func TestTwoProcessesAtACapThatFitsOneTurn(t *testing.T) {
	t.Parallel()
	release := filepath.Join(t.TempDir(), "release")
	e := newE2E(t, fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
		if len(r.ToolResults) > 0 {
			return fakeapi.Reply{Text: "Nightly work done."}
		}
		return fakeapi.Reply{Text: "Working.", ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
			"command": fmt.Sprintf("while [ ! -e %q ]; do sleep 0.05; done", release), "description": "wait to be let go"}}}
	}})
	spec := filepath.Join(e.dir, "work", "nightly.md")
	// Two calls of the fake cost $0.0016: one turn spends the day's cap.
	if err := os.WriteFile(spec, []byte("---\nname: nightly\nsurfaces: [terminal]\nallowed_tools: [Bash]\nmax_cost_usd_per_day: 0.0016\n---\nDo the nightly work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := e.store()
	first := e.child("", "", "run", spec)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	var firstRun store.Run
	waitFor(t, "the first run's turn to reserve the cap", func() bool {
		runs, err := st.ListRuns(ctx, store.RunFilter{Spec: "nightly"})
		if err != nil || len(runs) != 1 {
			return false
		}
		turns, err := st.Turns(ctx, runs[0].ID)
		firstRun = runs[0]
		return err == nil && len(turns) == 1 && turns[0].ReservedUSD > 0
	})
	if turns, _ := st.Turns(ctx, firstRun.ID); turns[0].ReservedUSD != 0.0016 {
		t.Fatalf("the first turn reserved $%v, want the whole cap, $0.0016", turns[0].ReservedUSD)
	}
	second := e.child("", "", "run", spec)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	secondOut := second.Stdout.(*lockedBuffer)
	waitFor(t, "the second run to wait for the first one's reservation", func() bool {
		return strings.Contains(secondOut.String(), "is reserved by turns still running; waiting for them to finish")
	})
	if os.WriteFile(release, nil, 0o600) != nil {
		t.Fatal("cannot let the first run go")
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	err := second.Wait()
	if code := second.ProcessState.ExitCode(); code != exitWaiting || !strings.Contains(secondOut.String(), "the spec nightly has spent $0.0016 of its $0.0016 today: continue?") {
		t.Fatalf("second run exit %d (%v), want %d (waiting on the cap question):\n%s", code, err, exitWaiting, secondOut.String())
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{Spec: "nightly"})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	for _, r := range runs {
		turns, err := st.Turns(ctx, r.ID)
		switch {
		case err != nil:
			t.Fatal(err)
		case r.ID == firstRun.ID:
			if r.Status != store.RunDone || len(turns) != 1 || turns[0].ReservedUSD != 0 || turns[0].Result.CostUSD <= 0 {
				t.Fatalf("first run %s, turns %+v; want done, its cost in place of its reservation", r.Status, turns)
			}
		default:
			if r.Status != store.RunWaiting || len(turns) != 0 {
				t.Fatalf("second run %s with %d turns; want waiting, no turn", r.Status, len(turns))
			}
			pendingCapSet(t, st, r.ID)
		}
	}
	if n := len(e.fake.Requests()); n != 2 {
		t.Fatalf("%d calls of the model, want the first run's 2: no agent of the second may start", n)
	}
}
