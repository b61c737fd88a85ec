package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
)

// BenchmarkObserve is the cost Metrics adds to each of the runner's
// progress events (most are text and tool events, which it ignores).
func BenchmarkObserve(b *testing.B) {
	m := NewMetrics(nil)
	text := runner.Event{Kind: runner.EventText, RunID: "r1", Text: "Working on it."}
	turn := runner.Event{Kind: runner.EventTurnFinished, RunID: "r1", Outcome: &executor.Outcome{Category: executor.CategoryRateLimit, CostUSD: 0.01, TurnCostUSD: 0.01}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%10 == 0 {
			m.Observe(turn)
		} else {
			m.Observe(text)
		}
	}
}

// BenchmarkScrape is one /metrics scrape's gathering and encoding.
func BenchmarkScrape(b *testing.B) {
	m := NewMetrics(nil)
	h := m.Handler()
	b.ReportAllocs()
	for b.Loop() {
		w := discardResponse{}
		h.ServeHTTP(w, scrapeRequest)
	}
}

var scrapeRequest = httptest.NewRequest(http.MethodGet, "/metrics", nil)

type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}
