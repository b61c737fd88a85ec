package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// retentionRun makes run id as of at, with a row in every table that
// belongs to a run, and leaves it in status (its delivery's worktree
// removed, not pending, unless told).
func retentionRun(t *testing.T, s *Store, id string, at time.Time, status RunStatus, dl Delivery) {
	t.Helper()
	ctx := context.Background()
	s.now = func() time.Time { return at }
	defer func() { s.now = time.Now }()
	if _, err := s.CreateRun(ctx, Run{ID: id, Spec: "nightly-" + id, Prompt: "p", Tick: at}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: id, Kind: TurnStart, Prompt: "p", SessionID: "sess"})
	if err != nil {
		t.Fatal(err)
	}
	set := testSet(id, turn.Seq, "qa")
	if err := s.FinishTurn(ctx, id, turn.Seq, TurnResult{Status: "success", SessionID: "sess"}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRunRule(ctx, id, "Bash(ls)"); err != nil {
		t.Fatal(err)
	}
	// A remembered decision's use (the rule itself is no run's: it stays).
	if _, err := s.db.ExecContext(ctx, `INSERT INTO rules (id, scope, kind, fingerprint, answers, made_by, created_at, expires_at)
		VALUES ('rule-kept', 'all', 'marker', 'x', '[]', 'alice', 1, 2) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO rule_uses (rule_id, run_id, set_id, at) VALUES ('rule-kept', ?, ?, 1)`, id, set.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RefsFor("slack").SetRunRef(ctx, id, "msg/"+set.ID, "C1/"+id); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunPolicy(ctx, id, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSession(ctx, id, "sess", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveGitGuard(ctx, GitGuard{RunID: id, CommonDir: "/c", GitDir: "/g", DotGit: "gitdir: /g", Snapshot: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	n := nanos(at)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tool_calls (tool_use_id, run_id, kind, tool, created_at) VALUES (?, ?, 'approval', 'Bash', ?)`, []any{"tu-" + id, id, n}},
		{`INSERT INTO turn_tool_calls (run_id, tool_use_id, tool, token, started_at) VALUES (?, ?, 'Bash', 1, ?)`, []any{id, "tt-" + id, n}},
		{`INSERT INTO run_leases (run_id, owner, expires_at, token) VALUES (?, 'gone', ?, 1)`, []any{id, n}},
		{`INSERT INTO run_requests (by_user, key, body_sha256, run_id, created_at) VALUES ('alice', ?, 'sum', ?, ?)`, []any{"key-" + id, id, n}},
		{`INSERT INTO cap_raises (set_id, scope, period, period_start, amount, created_at) VALUES (?, 'nightly', 'day', ?, 1, ?)`, []any{set.ID, n, n}},
		{`INSERT INTO group_answers (group_id, set_id, answered_by, surface, at) VALUES (?, ?, 'alice', 'cli', ?)`, []any{"g-" + id, set.ID, n}},
		{`INSERT INTO follow_ups (id, run_id, event_key, body, at, created_at) VALUES (?, ?, ?, 'more', ?, ?)`, []any{"fu-" + id, id, "k-" + id, n, n}},
		{`INSERT INTO remember_offers (surface, offer_key, run_id, set_id, user_id, made_by, remember, expires_at) VALUES ('slack', ?, ?, ?, 'U1', 'alice', 'spec:7d', ?)`, []any{set.ID, id, set.ID, n}},
	} {
		if _, err := s.db.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	dl.RunID, dl.RepoDir, dl.Worktree, dl.Branch, dl.State = id, "/repo", "/wt/"+id, "orchestrator/"+id, DeliveryPushed
	if dl.RemovedAt.IsZero() && !dl.Pending {
		dl.RemovedAt = at
	}
	if dl.RemovedAt.Equal(time.Unix(1, 0)) {
		dl.RemovedAt = time.Time{} // the worktree is still there
	}
	if err := s.SaveDelivery(ctx, dl); err != nil {
		t.Fatal(err)
	}
	if status != RunWaiting {
		if err := s.UpdateRun(ctx, id, RunUpdate{Status: status}); err != nil {
			t.Fatal(err)
		}
	}
}

// runRows counts the rows of every table that belong to run id.
func runRows(t *testing.T, s *Store, id string) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	count := func(name, q string) {
		var n int
		if err := s.db.QueryRowContext(ctx, q, id).Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n > 0 {
			out[name] = n
		}
	}
	count("runs", `SELECT COUNT(*) FROM runs WHERE id = ?`)
	count("question_sets", `SELECT COUNT(*) FROM question_sets WHERE run_id = ?`)
	for _, tb := range runTables {
		count(tb, `SELECT COUNT(*) FROM `+tb+` WHERE run_id = ?`)
	}
	for _, tb := range setTables {
		count(tb, `SELECT COUNT(*) FROM `+tb+` WHERE set_id IN (SELECT id FROM question_sets WHERE run_id = ?)`)
	}
	return out
}

// TestPurgeRunsRemovesOnlyFinishedOldRuns: with a short retention, the
// finished runs older than it go with every row of theirs, in batches; a
// waiting, running, queued or interrupted run, however old, stays whole,
// as do a recent run, one whose delivery is pending, one whose worktree is
// still there, one holding a live lease, and the run at the set feed's
// head (until a newer set moves the head past it).
func TestPurgeRunsRemovesOnlyFinishedOldRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	cutoff := now.Add(-24 * time.Hour)

	gone := []string{"done-1", "failed-1", "cancelled-1", "stopped-1", "done-2"}
	for i, id := range gone {
		st := []RunStatus{RunDone, RunFailed, RunCancelled, RunStopped, RunDone}[i]
		retentionRun(t, s, id, old.Add(time.Duration(i)*time.Minute), st, Delivery{})
	}
	retentionRun(t, s, "waiting", old, RunWaiting, Delivery{})
	retentionRun(t, s, "running", old, RunRunning, Delivery{})
	retentionRun(t, s, "queued", old, RunQueued, Delivery{})
	retentionRun(t, s, "interrupted", old, RunInterrupted, Delivery{})
	retentionRun(t, s, "recent", now, RunDone, Delivery{})
	retentionRun(t, s, "pending", old, RunDone, Delivery{Pending: true})
	retentionRun(t, s, "worktree", old, RunFailed, Delivery{RemovedAt: time.Unix(1, 0)})
	retentionRun(t, s, "leased", old, RunDone, Delivery{})
	if _, err := s.db.ExecContext(ctx, `UPDATE run_leases SET expires_at = ? WHERE run_id = 'leased'`, nanos(now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	retentionRun(t, s, "head", old, RunDone, Delivery{})
	kept := []string{"waiting", "running", "queued", "interrupted", "recent", "pending", "worktree", "leased"}
	before := map[string]map[string]int{}
	for _, id := range append(kept, "head") {
		before[id] = runRows(t, s, id)
	}
	if len(before["waiting"]) != len(runTables)+len(setTables)+2 {
		t.Fatalf("the test's run does not fill every table: %v", before["waiting"])
	}
	head, err := s.SetFeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	exp, err := s.ExpiredRuns(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range exp {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, gone) {
		t.Fatalf("ExpiredRuns = %v, want %v (oldest first)", ids, gone)
	}
	p, err := s.PurgeRuns(ctx, cutoff, 2) // three batches
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(p.Runs)
	want := slices.Clone(gone)
	slices.Sort(want)
	if !slices.Equal(p.Runs, want) || p.Rows < int64(len(gone)*(len(runTables)+len(setTables)+2)) {
		t.Fatalf("PurgeRuns = %+v, want the runs %v and all their rows", p, want)
	}
	for _, id := range gone {
		if left := runRows(t, s, id); len(left) != 0 {
			t.Errorf("run %s: rows left %v", id, left)
		}
	}
	for _, id := range append(kept, "head") {
		if got := runRows(t, s, id); !mapsEqual(got, before[id]) {
			t.Errorf("run %s: rows %v, want %v", id, got, before[id])
		}
	}
	if h, err := s.SetFeedHead(ctx); err != nil || h != head {
		t.Fatalf("set feed head = %d, %v; want %d kept", h, err, head)
	}
	if _, err := s.Run(ctx, "waiting"); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.OpenSets(ctx, "waiting"); err != nil || len(recs) != 1 {
		t.Fatalf("the waiting run's open sets = %v, %v", recs, err)
	}

	// A newer set moves the head: the old head's run goes then.
	newWaitingRun(t, s, "newer", "qz")
	p, err = s.PurgeRuns(ctx, cutoff, 0)
	if err != nil || !slices.Equal(p.Runs, []string{"head"}) {
		t.Fatalf("second purge = %+v, %v; want [head]", p, err)
	}
	if p, err := s.PurgeRuns(ctx, cutoff, 0); err != nil || len(p.Runs) != 0 {
		t.Fatalf("third purge = %+v, %v; want nothing", p, err)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPurgeCoversEveryRunTable: every table of the schema with a run_id
// column is among those PurgeRuns clears, and every one with a set_id
// column and none is among the set tables: a migration that adds a table
// of a run's rows must add it there too.
func TestPurgeCoversEveryRunTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	q := `SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' AND p.name = ?`
	if onPostgres(t) {
		q = `SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = ?`
	}
	tables := func(col string) []string {
		rows, err := s.db.QueryContext(ctx, q, col)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	withRun := tables("run_id")
	for _, tb := range withRun {
		if tb != "question_sets" && !slices.Contains(runTables, tb) {
			t.Errorf("table %s has a run_id column: add it to runTables (retention.go)", tb)
		}
	}
	for _, tb := range tables("set_id") {
		if !slices.Contains(withRun, tb) && !slices.Contains(setTables, tb) {
			t.Errorf("table %s has a set_id column: add it to setTables (retention.go)", tb)
		}
	}
	// The surfaces' refs know their run (refs.go): a run's go with it.
	if !slices.Contains(withRun, "surface_refs") {
		t.Errorf("surface_refs has no run_id column: a run's refs would outlive it")
	}
	if len(withRun) != len(runTables)+1 {
		t.Errorf("tables with run_id = %v, runTables = %v", withRun, runTables)
	}
}
