package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestFlockHolder reads the kernel's table of locks: an flock on the
// file's device and inode is held, by the pid it names; waiters, POSIX
// locks and other files are not.
func TestFlockHolder(t *testing.T) {
	t.Parallel()
	table := `1: POSIX  ADVISORY  READ 18198 fe:00:9988201 128 128
2: FLOCK  ADVISORY  WRITE 18308 fe:00:9988488 0 EOF
3: -> FLOCK  ADVISORY  WRITE 999 fe:00:9988203 0 EOF
4: FLOCK  ADVISORY  WRITE 4242 fe:00:9988203 0 EOF
`
	pid, held, err := flockHolder(bufio.NewScanner(strings.NewReader(table)), 0xfe, 0, 9988203)
	if err != nil || !held || pid != 4242 {
		t.Errorf("flockHolder = %d, %t, %v; want 4242, true", pid, held, err)
	}
	if _, held, _ := flockHolder(bufio.NewScanner(strings.NewReader(table)), 0xfe, 0, 9988201); held {
		t.Errorf("a POSIX lock counts as the daemon's flock")
	}
	if _, held, _ := flockHolder(bufio.NewScanner(strings.NewReader(table)), 0xfe, 1, 9988488); held {
		t.Errorf("a lock on another device counts")
	}
}

// TestStatusSaysWhetherServeRuns: status says whether a process holds the
// state directory's daemon lock, without taking it.
func TestStatusSaysWhetherServeRuns(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	state := filepath.Join(tm.Dir, "state")
	tm.write(t, DefaultConfigFile, fmt.Sprintf("state_dir: %q\n", state))
	status := func() statusReport {
		t.Helper()
		tm.stdout.Reset()
		if code := tm.exec("status", "--json"); code != 0 {
			t.Fatalf("status exit %d: %s", code, tm.stderr.String())
		}
		var rep statusReport
		if err := json.Unmarshal(tm.stdout.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := status(); rep.Serve.State != "stopped" {
		t.Errorf("no serve: serve = %+v", rep.Serve)
	}
	st := openTestStore(t, state)
	lock, err := st.LockDaemon()
	if err != nil {
		t.Fatal(err)
	}
	rep := status()
	if _, err := os.Stat("/proc/locks"); err == nil && (rep.Serve.State != "running" || rep.Serve.PID != os.Getpid()) {
		t.Errorf("serve holds the lock: serve = %+v, want running, pid %d", rep.Serve, os.Getpid())
	}
	tm.stdout.Reset()
	if code := tm.exec("status"); code != 0 || !strings.Contains(tm.stdout.String(), "serve: running on this state directory") {
		t.Errorf("status exit %d:\n%s", code, tm.stdout.String())
	}
	// status did not take the lock: serve still holds it, and once it lets
	// go anyone can take it.
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	if rep := status(); rep.Serve.State != "stopped" {
		t.Errorf("serve stopped: serve = %+v", rep.Serve)
	}
	lock, err = st.LockDaemon()
	if err != nil {
		t.Fatalf("the daemon lock is held after status: %v", err)
	}
	lock.Unlock()
	tm.stdout.Reset()
	if code := tm.exec("status"); code != 0 || !strings.Contains(tm.stdout.String(), "serve: not running on this state directory") {
		t.Errorf("status exit %d:\n%s", code, tm.stdout.String())
	}
}

// TestStatusScheduleSkipsSpecsWithActiveRuns: a scheduled spec whose run
// still waits gets no next run time (the scheduler skips its ticks) but
// "skipped while run X waits"; another scheduled spec gets its time;
// --spec shows one spec's runs, questions and schedule.
func TestStatusScheduleSkipsSpecsWithActiveRuns(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	dir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"nightly": "---\nname: nightly\nschedule: \"0 2 * * *\"\n---\nImplement spec X\n",
		"weekly":  "---\nname: weekly\nschedule: \"0 3 * * 1\"\n---\nSomething else\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig(fmt.Sprintf("\nspecs:\n  dir: %q\n", dir))
	if code, _, _ := e.run("", "run", filepath.Join(dir, "nightly.md")); code != exitWaiting {
		t.Fatalf("run exit %d, want %d", code, exitWaiting)
	}
	if code, _, _ := e.run("", "run", "--prompt", "Implement spec X"); code != exitWaiting {
		t.Fatalf("run exit %d, want %d", code, exitWaiting)
	}
	run := e.onlyRunOf("nightly")
	code, out, _ := e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	sched := map[string]statusNext{}
	for _, s := range rep.Schedule {
		sched[s.Spec] = s
	}
	if n := sched["nightly"]; n.Next != nil || n.SkippedWhile == nil || n.SkippedWhile.RunID != run.ID || n.SkippedWhile.Status != "waiting" {
		t.Errorf("nightly = %+v, want skipped while %s waits", n, run.ID)
	}
	if w := sched["weekly"]; w.Next == nil || w.SkippedWhile != nil {
		t.Errorf("weekly = %+v, want its next time", w)
	}
	if len(rep.Runs) != 2 || len(rep.QuestionSets) != 2 {
		t.Errorf("status lists %d runs and %d question sets, want 2 and 2", len(rep.Runs), len(rep.QuestionSets))
	}
	code, out, _ = e.run("", "status")
	if code != 0 || !strings.Contains(out, "skipped while run "+run.ID+" waits") {
		t.Errorf("status exit %d:\n%s", code, out)
	}
	code, out, _ = e.run("", "status", "--json", "--spec", "nightly")
	rep = statusReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("status --spec: exit %d, %v", code, err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].ID != run.ID || len(rep.QuestionSets) != 1 || rep.QuestionSets[0].RunID != run.ID ||
		len(rep.Schedule) != 1 || rep.Schedule[0].Spec != "nightly" {
		t.Errorf("status --spec nightly = %s", out)
	}
	code, out, _ = e.run("", "status", "--spec", "weekly")
	if code != 0 || strings.Contains(out, run.ID) || !strings.Contains(out, "weekly") {
		t.Errorf("status --spec weekly: exit %d:\n%s", code, out)
	}
	if code, _, errs := e.run("", "status", "--spec", "nope"); code != exitUsage || !strings.Contains(errs, "no spec of that name") {
		t.Errorf("status --spec nope: exit %d, %q", code, errs)
	}
}

// onlyRunOf returns the one run of spec.
func (e *e2e) onlyRunOf(spec string) store.Run {
	e.t.Helper()
	runs, err := e.store().ListRuns(context.Background(), store.RunFilter{Spec: spec})
	if err != nil || len(runs) != 1 {
		e.t.Fatalf("runs of %s = %+v, %v; want exactly one", spec, runs, err)
	}
	return runs[0]
}

func openTestStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
