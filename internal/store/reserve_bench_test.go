package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
)

// BenchmarkBeginTurnUnderCaps times beginning and finishing a turn with no
// cap and under a spec's day cap and all runs' day and month caps (three
// reads of spend and reservations in BeginTurn's transaction), on SQLite
// and PostgreSQL.
func BenchmarkBeginTurnUnderCaps(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, capped := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/caps=%v", db, capped), func(b *testing.B) {
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
				if _, err := s.CreateRun(ctx, Run{ID: "r1", Spec: "nightly", Prompt: "p", Status: RunRunning}); err != nil {
					b.Fatal(err)
				}
				day := time.Now().UTC().Truncate(24 * time.Hour)
				var caps []CapLimit
				if capped {
					caps = []CapLimit{{Scope: "nightly", From: day, To: day.AddDate(0, 0, 1), Limit: 1e9},
						{Scope: CapScopeAll, From: day, To: day.AddDate(0, 0, 1), Limit: 1e9},
						{Scope: CapScopeAll, From: day.AddDate(0, 0, -day.Day()+1), To: day.AddDate(0, 1, 0), Limit: 1e9}}
				}
				for b.Loop() {
					t, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnStart, Prompt: "p", Caps: caps})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.FinishTurn(ctx, "r1", t.Seq, TurnResult{Status: executor.StatusSuccess, CostUSD: 0.01}, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/turn")
			})
		}
	}
}
