package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestServeLogsNoNilErrorAndRoundedCosts: serve's log of a turn and a run
// that ended well has no err=<nil> (nor an empty category), and its costs
// are rounded as the progress lines show them; a run that failed logs its
// error.
func TestServeLogsNoNilErrorAndRoundedCosts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	logEvent(log, runner.Event{Kind: runner.EventTurnFinished, RunID: "r1", Turn: 1,
		Outcome: &executor.Outcome{Status: "success", TurnCostUSD: 0.00081234567}})
	logEvent(log, runner.Event{Kind: runner.EventRunEnded, RunID: "r1", Run: &store.Run{ID: "r1", Status: store.RunDone, CostUSD: 0.0016000000001}})
	ok := buf.String()
	for _, bad := range []string{"err=", "<nil>", "category=", "0.00081234567", "0.0016000000001"} {
		if strings.Contains(ok, bad) {
			t.Errorf("the log of a run that ended well has %q:\n%s", bad, ok)
		}
	}
	for _, want := range []string{"cost_usd=0.0008", "cost_usd=0.0016"} {
		if !strings.Contains(ok, want) {
			t.Errorf("the log lacks %q:\n%s", want, ok)
		}
	}
	buf.Reset()
	logEvent(log, runner.Event{Kind: runner.EventRunEnded, RunID: "r2", Run: &store.Run{ID: "r2", Status: store.RunFailed}, Err: errors.New("boom")})
	if !strings.Contains(buf.String(), "err=boom") {
		t.Errorf("the log of a failed run lacks its error:\n%s", buf.String())
	}
}
