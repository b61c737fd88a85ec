package runner

import (
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestSessionDeltaCountsEachCallOnce: a turn's cost is the session's total
// less what its earlier turns cost, never less than what the CLI says this
// process spent since its last result (a session whose total started again).
func TestSessionDeltaCountsEachCallOnce(t *testing.T) {
	t.Parallel()
	turn := func(seq int, session string, cost float64) store.Turn {
		return store.Turn{Seq: seq, SessionID: session, Finished: true, Result: store.TurnResult{CostUSD: cost}}
	}
	for _, tc := range []struct {
		name         string
		turns        []store.Turn
		total, since float64
		want         float64
	}{
		{"first turn: the total", nil, 0.5, 0.5, 0.5},
		{"resumed: the difference", []store.Turn{turn(1, "s1", 0.5)}, 0.75, 0.25, 0.25},
		{"one process, two results: the difference, more than since the last result", []store.Turn{turn(1, "s1", 0.5)}, 1, 0.25, 0.5},
		{"another session's turns do not count", []store.Turn{turn(1, "s0", 2), turn(2, "s1", 0.5)}, 0.75, 0.25, 0.25},
		{"the total started again: what this process spent", []store.Turn{turn(1, "s1", 0.5), turn(2, "s1", 0.25)}, 0.125, 0.125, 0.125},
		{"started again, past the old total: what this process spent", []store.Turn{turn(1, "s1", 0.5)}, 0.625, 0.625, 0.625},
		{"unfinished and later turns do not count", []store.Turn{turn(1, "s1", 0.5), {Seq: 2, SessionID: "s1"}, turn(4, "s1", 9)}, 0.75, 0.25, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := executor.Outcome{CostUSD: tc.total, TurnCostUSD: tc.since}
			if got := sessionDelta(out, tc.turns, 3, "s1"); got != tc.want {
				t.Fatalf("sessionDelta = %v, want %v", got, tc.want)
			}
		})
	}
}
