package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// BenchmarkMetricsScrapeWaiting is one /metrics scrape (the handler) with
// 10,000 and 100,000 runs waiting on SQLite and on PostgreSQL: "read" waits
// for the store's sums read for this scrape (as while reads are quick),
// "served" is what a scrape costs once reads are slow (the last sums,
// while a read goes on).
func BenchmarkMetricsScrapeWaiting(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/waiting=%d", db, n), func(b *testing.B) {
				ctx := context.Background()
				var u string
				if db == "postgres" {
					u = pgtest.Schema(b)
				}
				st, err := store.OpenDatabase(ctx, b.TempDir(), u)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				if err := st.SeedWaitingRuns(ctx, store.Seed{Prefix: "w", Runs: n, Specs: []string{"nightly", "weekly", "hourly", ""}}); err != nil {
					b.Fatal(err)
				}
				for _, mode := range []string{"read", "served"} {
					b.Run(mode, func(b *testing.B) {
						m := NewMetrics(st)
						if mode == "read" {
							m.agg.slow = time.Hour // every scrape waits for its read
						}
						h := m.Handler()
						m.agg.get() // the first read, which every scrape waits for
						var bytes int
						for b.Loop() {
							w := httptest.NewRecorder()
							h.ServeHTTP(w, scrapeRequest)
							if w.Code != 200 {
								b.Fatalf("/metrics: %d", w.Code)
							}
							bytes = w.Body.Len()
						}
						b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/scrape")
						b.ReportMetric(float64(bytes), "bytes/scrape")
					})
				}
			})
		}
	}
}
