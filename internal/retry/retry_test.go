package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestBackoffWaits: Initial doubling with each try up to Max, without
// overflowing; Next and Reset count a loop's tries.
func TestBackoffWaits(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: 30 * time.Second}
	for n, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
		if got := b.Wait(n); got != want*time.Second {
			t.Errorf("Wait(%d) = %v, want %v", n, got, want*time.Second)
		}
	}
	if got := (Backoff{Initial: time.Minute}).Wait(1000); got <= 0 || got < time.Duration(math.MaxInt64/2) {
		t.Errorf("Wait(1000) without Max = %v, want the largest doubling, positive", got)
	}
	if got := (Backoff{}).Wait(3); got != 0 {
		t.Errorf("zero Backoff Wait = %v, want 0", got)
	}
	loop := Backoff{Initial: 250 * time.Millisecond, Max: time.Second}
	for _, want := range []time.Duration{250, 500, 1000, 1000} {
		if got := loop.Next(); got != want*time.Millisecond {
			t.Errorf("Next = %v, want %v", got, want*time.Millisecond)
		}
	}
	loop.Reset()
	if got := loop.Next(); got != 250*time.Millisecond {
		t.Errorf("Next after Reset = %v, want 250ms", got)
	}
}

// TestJitterSpreadsWithoutShortening: a jittered wait is at least the wait
// and less than one and a half times it, and not always the same.
func TestJitterSpreadsWithoutShortening(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: 8 * time.Second, Jitter: Jitter}
	seen := map[time.Duration]bool{}
	for i := range 200 {
		n := i % 5
		base := Backoff{Initial: time.Second, Max: 8 * time.Second}.Wait(n)
		got := b.Wait(n)
		if got < base || got >= base+base/2 {
			t.Fatalf("jittered Wait(%d) = %v, want in [%v, %v)", n, got, base, base+base/2)
		}
		seen[got] = true
	}
	if len(seen) < 10 {
		t.Errorf("%d different waits in 200, want them spread", len(seen))
	}
	if Jitter(0) != 0 || Jitter(1) != 1 {
		t.Error("Jitter of 0 or 1ns changed it")
	}
}

// TestSleepEndsWithItsContext: Sleep returns the context's error when it
// ends first, at once for a context already done, nil after a short wait.
func TestSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on a cancelled context = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep cut short = %v", err)
	}
}

// TestStoreOutage: the wait between tries at an unreachable store starts
// at a quarter second and never passes half a minute, jitter included.
func TestStoreOutage(t *testing.T) {
	b := StoreOutage()
	if got := b.Wait(0); got < 250*time.Millisecond || got > 375*time.Millisecond {
		t.Errorf("first wait = %v, want 250ms to 375ms", got)
	}
	if got := b.Wait(1000); got < 30*time.Second || got > 45*time.Second {
		t.Errorf("wait after many tries = %v, want 30s to 45s", got)
	}
	if a, c := StoreOutage(), StoreOutage(); a == c {
		t.Error("StoreOutage returned one Backoff twice; each loop needs its own count")
	}
}
