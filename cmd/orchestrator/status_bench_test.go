package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// BenchmarkStatusWaiting is `orchestrator status` with 10,000 and 100,000
// runs waiting, on SQLite and on PostgreSQL: the gather step (its reads of
// the store) and the printing, with the bytes printed, as text and --json.
func BenchmarkStatusWaiting(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/waiting=%d", db, n), func(b *testing.B) {
				ctx := context.Background()
				var u string
				if db == "postgres" {
					u = pgtest.Schema(b)
				}
				dir := b.TempDir()
				st, err := store.OpenDatabase(ctx, filepath.Join(dir, "state"), u)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				t0 := time.Now()
				if err := st.SeedWaitingRuns(ctx, store.Seed{Prefix: "w", Runs: n, Specs: []string{"nightly", "weekly", "hourly", ""}}); err != nil {
					b.Fatal(err)
				}
				b.Logf("seeded %d waiting runs on %s in %v", n, db, time.Since(t0).Round(time.Millisecond))
				m := &Main{Config: config.DefaultEnv(func(string) (string, bool) { return "", false })}
				m.Config.Specs.Dir = filepath.Join(dir, "specs")
				for _, asJSON := range []bool{false, true} {
					name := "text"
					if asJSON {
						name = "json"
					}
					b.Run(name, func(b *testing.B) {
						var out bytes.Buffer
						var gather time.Duration
						for b.Loop() {
							out.Reset()
							g0 := time.Now()
							rep, err := m.gatherStatus(ctx, st, statusQuery{limit: defaultStatusLimit})
							if err != nil {
								b.Fatal(err)
							}
							gather += time.Since(g0)
							if asJSON {
								if err := writeJSON(&out, rep); err != nil {
									b.Fatal(err)
								}
							} else {
								printStatus(&out, rep)
							}
						}
						b.ReportMetric(float64(gather.Microseconds())/1000/float64(b.N), "ms/gather")
						b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/status")
						b.ReportMetric(float64(out.Len()), "bytes/status")
					})
				}
			})
		}
	}
}
