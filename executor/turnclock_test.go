package executor

import (
	"strings"
	"testing"
	"time"
)

// The turn's clock stands while a person is asked (waits nest), and runs
// otherwise.
func TestTurnClockDoesNotCountWaits(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	c := newTurnClock(func() time.Time { return now })
	step := func(d time.Duration) { now = now.Add(d) }
	check := func(what string, worked, waited time.Duration) {
		t.Helper()
		if w, wt := c.worked(); w != worked || wt != waited {
			t.Errorf("%s: worked %s, waited %s; want %s, %s", what, w, wt, worked, waited)
		}
	}
	step(2 * time.Minute)
	check("working", 2*time.Minute, 0)
	c.wait() // an approval
	step(time.Hour)
	check("waiting", 2*time.Minute, time.Hour)
	c.wait() // and a Hold, nested
	step(time.Hour)
	c.done()
	step(time.Hour)
	check("still one wait open", 2*time.Minute, 3*time.Hour)
	c.done()
	step(3 * time.Minute)
	check("working again", 5*time.Minute, 3*time.Hour)
	c.done() // one too many: ignored
	step(time.Minute)
	check("after an extra done", 6*time.Minute, 3*time.Hour)
}

// TestRunTimeoutHeld: agent.timeout does not count the time a person is
// asked for the CLI (Hold, as for a can_use_tool request): held for several
// timeouts the CLI is not stopped; once released the rest of its time
// applies and it is stopped for the timeout, saying how long it waited.
func TestRunTimeoutHeld(t *testing.T) {
	t.Parallel()
	e := fakeExecutor(t, "stall", func(c *Config) { c.Timeout = 500 * time.Millisecond })
	run, err := e.Start(testCtx(t), Request{Prompt: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	release := run.Hold()
	done := make(chan Outcome, 1)
	go func() {
		for run.Next() {
		}
		done <- run.Outcome()
	}()
	select {
	case o := <-done:
		t.Fatalf("the CLI was stopped while a person was asked: %+v", o)
	case <-time.After(3 * time.Second): // several timeouts
	}
	release()
	select {
	case o := <-done:
		if o.Category != CategoryTimeout || !strings.Contains(o.Error, "not counting") {
			t.Fatalf("outcome %+v, want the timeout, not counting the wait", o)
		}
	case <-time.After(time.Minute):
		t.Fatal("the timeout never applied after the release")
	}
}
