package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestStatusReadsDoNotGrowWithRuns: status reads the store with one
// statement per kind of thing, not one per run: with 3 runs and with 12
// (each waiting with a question, tied to a host, with a delivery, of a
// scheduled spec) it sends the same number of statements, with --spec and
// without.
func TestStatusReadsDoNotGrowWithRuns(t *testing.T) {
	t.Parallel()
	statements := func(n int, q statusQuery) (int64, statusReport) {
		tm := newTestMain(t)
		state := filepath.Join(tm.Dir, "state")
		dir := filepath.Join(tm.Dir, "specs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"nightly", "weekly"} {
			body := "---\nname: " + name + "\nschedule: \"0 2 * * *\"\n---\nDo it\n"
			if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tm.Config = config.DefaultEnv(tm.LookupEnv)
		tm.Config.Specs.Dir = dir
		st := openTestStore(t, state)
		seedStatusRuns(t, st, n)
		n0 := st.Statements()
		rep, err := tm.gatherStatus(context.Background(), st, q)
		if err != nil {
			t.Fatal(err)
		}
		return st.Statements() - n0, rep
	}
	for _, q := range []statusQuery{{}, {spec: "nightly"}, {all: true}} {
		few, rep := statements(3, q)
		many, repMany := statements(12, q)
		t.Logf("%+v: %d statements for 3 runs, %d for 12", q, few, many)
		if many != few {
			t.Errorf("%+v: %d statements for 3 runs, %d for 12: status reads the store once per run", q, few, many)
		}
		// The runs were all seen: each kind of thing was read.
		if len(rep.Runs) != 3 || len(repMany.Runs) != 12 || len(repMany.QuestionSets) != 12 || len(repMany.Deliveries) != 18 ||
			len(repMany.Schedule) == 0 || repMany.Schedule[0].SkippedWhile == nil {
			t.Errorf("%+v: status of 12 runs: %d runs, %d sets, %d deliveries, schedule %+v", q, len(repMany.Runs),
				len(repMany.QuestionSets), len(repMany.Deliveries), repMany.Schedule)
		}
	}
}

// seedStatusRuns makes n runs of the spec nightly, each waiting for a
// question, tied to a host, with work in progress not pushed; every other
// one's delivery is pending too.
func seedStatusRuns(t *testing.T, st *store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("run%02d", i)
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Spec: "nightly", Prompt: "do it", Surfaces: []string{"terminal"}, Host: "h1"}); err != nil {
			t.Fatal(err)
		}
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "do it", SessionID: "sess"})
		if err != nil {
			t.Fatal(err)
		}
		set := questions.Set{ID: id + "-s", RunID: id, Turn: turn.Seq, Questions: []questions.Question{{ID: "q" + id, Text: "Which?"}}}
		if err := st.FinishTurn(ctx, id, turn.Seq, store.TurnResult{Status: "success", SessionID: "sess"}, &set, []string{"terminal"}); err != nil {
			t.Fatal(err)
		}
		d := store.Delivery{RunID: id, Worktree: "/w/" + id, Branch: "orchestrator/" + id, State: store.DeliveryPrepared, CommitSHA: "abc" + id}
		if i%2 == 0 {
			d.Pending, d.Attempts, d.NextAttemptAt, d.LastError = true, 1, time.Now(), "push refused"
		}
		if err := st.SaveDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
}
