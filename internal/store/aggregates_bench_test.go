package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
)

// BenchmarkAggregates times each aggregate read with 10,000 and 100,000
// runs waiting (seeded in bulk), on SQLite and on PostgreSQL.
func BenchmarkAggregates(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/waiting=%d", db, n), func(b *testing.B) {
				s := seededStore(b, db, n)
				ctx := context.Background()
				for _, read := range []struct {
					name string
					fn   func() error
				}{
					{"RunCounts", func() error { _, err := s.RunCounts(ctx, AggFilter{}); return err }},
					{"PendingCounts", func() error { _, err := s.PendingCounts(ctx, AggFilter{}); return err }},
					{"WaitingSets20", func() error { _, _, err := s.NewestWaitingSets(ctx, WaitingFilter{Limit: 20}); return err }},
					{"WaitingSets20Spec", func() error {
						_, _, err := s.NewestWaitingSets(ctx, WaitingFilter{Spec: "weekly", Limit: 20})
						return err
					}},
					{"NewestActive", func() error { _, err := s.NewestActive(ctx, ""); return err }},
					{"SpecCosts", func() error { _, err := s.SpecCosts(ctx, ""); return err }},
				} {
					b.Run(read.name, func(b *testing.B) {
						for b.Loop() {
							if err := read.fn(); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
					})
				}
			})
		}
	}
}

// seededStore opens a store on db ("sqlite" or "postgres") with n runs
// waiting on a question, of three specs and of prompts, and its
// statistics up to date (as autovacuum and ANALYZE leave a live database).
func seededStore(b *testing.B, db string, n int) *Store {
	b.Helper()
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
	t0 := time.Now()
	if err := s.SeedWaitingRuns(ctx, Seed{Prefix: "w", Runs: n, Specs: []string{"nightly", "weekly", "hourly", ""}}); err != nil {
		b.Fatal(err)
	}
	analyze := `ANALYZE`
	if db == "postgres" {
		analyze = `VACUUM ANALYZE`
	}
	if _, err := s.db.ExecContext(ctx, analyze); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d waiting runs on %s in %v", n, db, time.Since(t0).Round(time.Millisecond))
	return s
}
