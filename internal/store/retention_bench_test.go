package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
)

// BenchmarkPurgeRuns times PurgeRuns removing 10,000 finished runs (each
// with a turn, a question set and its question), in batches of
// DefaultPurgeBatch, on SQLite and on PostgreSQL; ms/1000runs is the
// figure to compare.
func BenchmarkPurgeRuns(b *testing.B) {
	const n = 10_000
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(fmt.Sprintf("%s/runs=%d", db, n), func(b *testing.B) {
			ctx := context.Background()
			var u string
			if db == "postgres" {
				u = pgtest.Schema(b)
			}
			s, err := OpenDatabase(ctx, b.TempDir(), u)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			old := time.Now().Add(-48 * time.Hour)
			var total time.Duration
			for i := 0; i < b.N; i++ {
				if err := s.SeedWaitingRuns(ctx, Seed{Prefix: fmt.Sprintf("p%d-", i), Runs: n, Specs: []string{"nightly", ""}}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.db.ExecContext(ctx, `UPDATE runs SET status = 'done', updated_at = ? WHERE id LIKE ?`, nanos(old), fmt.Sprintf("p%d-%%", i)); err != nil {
					b.Fatal(err)
				}
				// A waiting run made last holds the feed's head.
				id := fmt.Sprintf("head-%d", i)
				if _, err := s.CreateRun(ctx, Run{ID: id, Prompt: "p"}); err != nil {
					b.Fatal(err)
				}
				turn, err := s.BeginTurn(ctx, Turn{RunID: id, Kind: TurnStart, Prompt: "p"})
				if err != nil {
					b.Fatal(err)
				}
				set := testSet(id, turn.Seq, "q")
				if err := s.FinishTurn(ctx, id, turn.Seq, TurnResult{Status: "success"}, &set, nil); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				p, err := s.PurgeRuns(ctx, time.Now().Add(-24*time.Hour), 0)
				total += time.Since(t0)
				if err != nil || len(p.Runs) != n {
					b.Fatalf("purged %d runs, %v; want %d", len(p.Runs), err, n)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N)/(n/1000), "ms/1000runs")
		})
	}
}
