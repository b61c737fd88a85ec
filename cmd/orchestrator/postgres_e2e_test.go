package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestPostgresStoreRunAnswerResume: with database_url the whole loop keeps
// its state in PostgreSQL, with the real CLI: run waits on a question,
// status shows it, an answer from another process with a state directory
// of its own (another machine) is taken, and resume carries it to the
// model exactly once. No SQLite database is made.
func TestPostgresStoreRunAnswerResume(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	dbURL := pgtest.Schema(t)
	e.writeConfig(fmt.Sprintf("\ndatabase_url: %q\n", dbURL))
	code, _, _ := e.run("", "run", "--prompt", "Implement spec X")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d (waiting)", code, exitWaiting)
	}
	code, out, _ := e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	pending := pendingQuestions(rep.QuestionSets)
	if len(pending) != 1 || len(rep.Runs) != 1 || rep.Runs[0].Status != "waiting" {
		t.Fatalf("status = %+v", rep)
	}
	q := struct{ ID, RunID string }{pending[0].q.ID, pending[0].set.RunID}

	// The other machine: its own state directory, the same database.
	other := filepath.Join(e.dir, "other.yaml")
	otherState := filepath.Join(e.dir, "other-state")
	cfg := strings.Replace(e.base, fmt.Sprintf("%q", e.state), fmt.Sprintf("%q", otherState), 1)
	if err := os.WriteFile(other, []byte(cfg+fmt.Sprintf("\ndatabase_url: %q\n", dbURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	answer := e.child("", "", "answer", q.ID, "2")
	answer.Args[2] = other // --config
	if err := answer.Run(); err != nil {
		t.Fatalf("answer from another machine: %v", err)
	}
	code, out, _ = e.run("", "resume", q.RunID)
	if code != 0 || !strings.Contains(out, "Implemented with JWT.") {
		t.Fatalf("resume exit %d", code)
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("answers sent %d times, want 1", n)
	}
	for _, dir := range []string{e.state, otherState} {
		if _, err := os.Stat(filepath.Join(dir, store.FileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a SQLite database was made (%v)", dir, err)
		}
	}
	st, err := store.OpenDatabase(context.Background(), t.TempDir(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if run, err := st.Run(context.Background(), q.RunID); err != nil || run.Status != store.RunDone {
		t.Fatalf("run in PostgreSQL: %+v, %v", run.Status, err)
	}
}

// TestPostgresStoreApprovalThroughTheHook: with database_url the
// orchestrator's hook (a process the agent CLI starts, with none of the
// orchestrator's environment) finds the database and hands a person's
// decision to the CLI, once.
func TestPostgresStoreApprovalThroughTheHook(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  allowed_tools: []\n", 1)
	dbURL := pgtest.Schema(t)
	e.writeConfig(fmt.Sprintf("\ndatabase_url: %q\n", dbURL))
	code, out, _ := e.run("Allow once\n", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "touch "+madeFile) {
		t.Errorf("the terminal does not show the command:\n%s", out)
	}
	if !e.made() || e.toolResults() != 1 {
		t.Errorf("the command ran: %v; tool results %d", e.made(), e.toolResults())
	}
	if _, err := os.Stat(filepath.Join(e.state, store.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a SQLite database was made (%v)", err)
	}
}
