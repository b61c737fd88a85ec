package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestServeSIGTERMAndRestart: `serve` gets SIGTERM while one run waits on a
// question and another is in the middle of a turn. A new `serve` finishes
// both, with each prompt handed to the model exactly once: the answer once,
// and the interrupted turn continued rather than sent again.
func TestServeSIGTERMAndRestart(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	rules := append([]fakeapi.Rule{
		{When: "Slow task", Times: 1, Reply: fakeapi.Reply{Text: "Working on it, slowly.", ChunkDelay: time.Second, Chunks: 20}},
	}, standardRules(0)...)
	e := newE2E(t, rules...)
	specDir := filepath.Join(e.dir, "specs")
	os.MkdirAll(specDir, 0o700)
	for name, body := range map[string]string{
		"asks": "---\nname: asks\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nImplement spec X\n",
		"slow": "---\nname: slow\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nSlow task\n",
	} {
		if err := os.WriteFile(filepath.Join(specDir, name+".md"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n", specDir))
	st := e.store()
	ctx := context.Background()

	// Both specs start on the first tick; later ticks are skipped while
	// their runs are busy.
	serve := e.child("", "", "serve")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a question pending and the slow turn streaming", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
		slow := false
		for _, r := range e.fake.Requests() {
			slow = slow || strings.Contains(r.LastUserText, "Slow task")
		}
		return len(sets) == 1 && slow
	})
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v, want exit 0", err)
	}
	byName := map[string]store.Run{}
	runs, _ := st.ListRuns(ctx, store.RunFilter{})
	for _, r := range runs {
		byName[r.Spec] = r
	}
	if byName["asks"].Status != store.RunWaiting || byName["slow"].Status != store.RunInterrupted {
		t.Fatalf("after SIGTERM: asks %s, slow %s; want waiting and interrupted", byName["asks"].Status, byName["slow"].Status)
	}

	// The question is answered while no serve runs.
	sets, _ := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
	if code, _, _ := e.run("", "answer", sets[0].Set.Questions[0].ID, "2"); code != 0 {
		t.Fatalf("answer: exit %d", code)
	}

	// The new serve schedules nothing (so that no new run muddles the
	// counts below) but takes up the two stored runs.
	empty := filepath.Join(e.dir, "no-specs")
	os.MkdirAll(empty, 0o700)
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n", empty))
	serve = e.child("", "", "serve")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both runs done", func() bool {
		a, _ := st.Run(ctx, byName["asks"].ID)
		s, _ := st.Run(ctx, byName["slow"].ID)
		return a.Status == store.RunDone && s.Status == store.RunDone
	})
	serve.Process.Signal(syscall.SIGTERM)
	wantExit0(t, serve.Wait())

	if n := e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want 1", n)
	}
	var slowPrompts, continues int
	for _, r := range e.fake.Requests() {
		slowPrompts += strings.Count(r.LastUserText, "Slow task")
		if strings.Contains(r.LastUserText, "from where you left off") {
			continues++
		}
	}
	if slowPrompts != 1 || continues != 1 {
		t.Fatalf("slow task sent %d times and continued %d times; want 1 and 1", slowPrompts, continues)
	}
	a, _ := st.Run(ctx, byName["asks"].ID)
	s, _ := st.Run(ctx, byName["slow"].ID)
	if a.FinalText != "Implemented with JWT." || s.FinalText != "Finished after the interruption." {
		t.Fatalf("final texts: %q, %q", a.FinalText, s.FinalText)
	}
}

func wantExit0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("serve exited %d", exit.ExitCode())
		}
		t.Fatal(err)
	}
}
