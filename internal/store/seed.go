package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Seed describes waiting runs SeedWaitingRuns writes: for benchmarks and
// load tests (the program never calls it).
type Seed struct {
	Prefix string   // the runs' IDs are Prefix + a number; unique per store
	Runs   int      // how many
	Specs  []string // the runs' specs, in turn ("" a run of a prompt); none: all of a prompt
	// Start is when the first run was made and asked; each next one a
	// millisecond later. Zero: Runs milliseconds before now.
	Start time.Time
}

// seedBatch is how many runs one transaction of SeedWaitingRuns writes,
// and seedRows how many rows one INSERT of it holds (SQLite binds at most
// 32,766 parameters a statement, PostgreSQL 65,535).
const (
	seedBatch = 5000
	seedRows  = 500
)

// SeedWaitingRuns writes sd.Runs runs waiting on a question, as the runner
// leaves them: the run (waiting), its first turn (finished) and a pending
// set of one marker question asked on the terminal. One transaction per
// 5,000 runs, several rows an INSERT.
func (s *Store) SeedWaitingRuns(ctx context.Context, sd Seed) error {
	if sd.Prefix == "" || sd.Runs <= 0 {
		return errors.New("seed waiting runs: no ID prefix or no runs")
	}
	specs := sd.Specs
	if len(specs) == 0 {
		specs = []string{""}
	}
	start := sd.Start
	if start.IsZero() {
		start = s.now().Add(-time.Duration(sd.Runs) * time.Millisecond)
	}
	for from := 0; from < sd.Runs; from += seedBatch {
		to := min(from+seedBatch, sd.Runs)
		err := s.tx(ctx, func(tx *txn) error {
			for lo := from; lo < to; lo += seedRows {
				if err := seedRowsOf(ctx, tx, sd.Prefix, specs, start, lo, min(lo+seedRows, to)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed waiting runs %d–%d: %w", from, to, err)
		}
	}
	return nil
}

// seedRowsOf inserts the runs lo..hi-1 of a seed, with their turn, set and
// question: four statements.
func seedRowsOf(ctx context.Context, tx *txn, prefix string, specs []string, start time.Time, lo, hi int) error {
	var runs, turns, sets, qs []any
	for i := lo; i < hi; i++ {
		id := fmt.Sprintf("%s%06d", prefix, i)
		at := nanos(start.Add(time.Duration(i) * time.Millisecond))
		spec := specs[i%len(specs)]
		set := questions.Set{ID: id + "-s1", RunID: id, Turn: 1,
			Questions: []questions.Question{{ID: "q" + id, Text: "Which database should the service use?",
				Options: []questions.Option{{Label: "PostgreSQL"}, {Label: "SQLite"}}}}}
		body, err := encodeJSON(set)
		if err != nil {
			return err
		}
		runs = append(runs, id, spec, "Seeded run "+id, "Implement the seeded change", `["terminal"]`, RunWaiting, "sess-"+id, at, at)
		turns = append(turns, id, 1, TurnStart, "Implement the seeded change", "sess-"+id, 1, "success", at, at)
		sets = append(sets, set.ID, id, 1, SetPending, body, `["terminal"]`, at, questions.KindOf(set))
		qs = append(qs, set.Questions[0].ID, set.ID, 0)
	}
	n := hi - lo
	for _, ins := range []struct {
		head string
		cols int
		args []any
	}{
		{`INSERT INTO runs (id, spec, title, prompt, surfaces, status, session_id, created_at, updated_at) VALUES `, 9, runs},
		{`INSERT INTO turns (run_id, seq, kind, prompt, session_id, finished, status, started_at, finished_at) VALUES `, 9, turns},
		{`INSERT INTO question_sets (id, run_id, turn, state, body, surfaces, created_at, kind) VALUES `, 8, sets},
		{`INSERT INTO questions (id, set_id, position) VALUES `, 3, qs},
	} {
		row := "(" + placeholders(ins.cols) + ")"
		if _, err := tx.ExecContext(ctx, ins.head+strings.Repeat(row+",", n-1)+row, ins.args...); err != nil {
			return err
		}
	}
	return nil
}
