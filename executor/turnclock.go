package executor

import (
	"sync"
	"time"
)

// turnClock measures how long a turn has worked, not counting the time a
// person is being asked for it (a can_use_tool request waiting for its
// answer, or a Hold): Config.Timeout bounds the turn's own work, so a
// question answered after an hour does not stop the turn that asked it.
// Safe for concurrent use.
type turnClock struct {
	now func() time.Time

	mu      sync.Mutex
	used    time.Duration // worked before since
	since   time.Time     // when the clock last started running
	waiting int           // open waits; the clock stands while > 0
	waited  time.Duration // time spent waiting, for the stop's message
	waitAt  time.Time     // when the current wait began
}

func newTurnClock(now func() time.Time) *turnClock {
	return &turnClock{now: now, since: now()}
}

// wait stops the clock until the matching done; waits nest.
func (c *turnClock) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == 0 {
		t := c.now()
		c.used += t.Sub(c.since)
		c.waitAt = t
	}
	c.waiting++
}

// done ends a wait: the clock runs again once no wait is open.
func (c *turnClock) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == 0 {
		return
	}
	c.waiting--
	if c.waiting == 0 {
		t := c.now()
		c.waited += t.Sub(c.waitAt)
		c.since = t
	}
}

// worked is the time the turn has worked so far, and the time it spent
// waiting for people.
func (c *turnClock) worked() (worked, waited time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	worked, waited = c.used, c.waited
	if c.waiting == 0 {
		worked += c.now().Sub(c.since)
	} else {
		waited += c.now().Sub(c.waitAt)
	}
	return worked, waited
}

// waitBegins and waitEnds count a wait on n (pendingN or heldN) and stop
// or restart the turn's clock with it.
func (r *Process) waitBegins(n interface{ Add(int32) int32 }) {
	n.Add(1)
	if r.clock != nil {
		r.clock.wait()
	}
}

func (r *Process) waitEnds(n interface{ Add(int32) int32 }) {
	n.Add(-1)
	if r.clock != nil {
		r.clock.done()
	}
}
