// Package retry is the one place that computes the waits between tries:
// exponential backoff, with jitter, and a sleep that ends with its context.
// The GitHub and Discord surfaces, the delivery and the daemon use it; a
// wait a service asks for (Retry-After, a rate limit's reset) is the
// service's, and callers wait that instead.
package retry

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is a sequence of waits: Initial, doubling with each try, at most
// Max, each spread by Jitter. The zero Jitter spreads nothing (tests that
// assert the waits); callers that retry for real set Jitter to Jitter.
//
// Next and Reset keep the count of one loop's tries, Wait computes the
// wait of any try: a Backoff is not safe for concurrent use through Next.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration // 0: no bound but overflow
	Jitter  func(time.Duration) time.Duration

	tries int
}

// StoreOutage is one loop's wait between tries at an unreachable store
// (the daemon's loops, the runner's room): from a quarter second,
// doubling up to half a minute, each up to half as long again (Jitter).
func StoreOutage() *Backoff {
	return &Backoff{Initial: 250 * time.Millisecond, Max: 30 * time.Second, Jitter: Jitter}
}

// Wait returns the wait after try n (0: after the first failure):
// Initial doubled n times, at most Max, then spread by Jitter.
func (b Backoff) Wait(n int) time.Duration {
	d := max(b.Initial, 0)
	for ; n > 0 && d > 0 && d <= math.MaxInt64/2 && (b.Max <= 0 || d < b.Max); n-- {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	if b.Jitter != nil {
		d = b.Jitter(d)
	}
	return d
}

// Next returns the wait after one more failed try of the loop.
func (b *Backoff) Next() time.Duration {
	d := b.Wait(b.tries)
	b.tries++
	return d
}

// Reset starts the loop's count again (after a try that worked).
func (b *Backoff) Reset() { b.tries = 0 }

// Jitter returns d plus a random part of up to half of it. It never
// shortens a wait, so a wait that a bound was computed from still holds,
// and clients that failed together do not try again together.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d + rand.N(d/2)
}

// Sleep waits d, or until ctx ends and then returns ctx's error. A wait of
// zero or less returns ctx's error at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
