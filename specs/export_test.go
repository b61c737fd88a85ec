package specs

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnknownSpec is returned by RunNow for a spec name the scheduler does not have.
var ErrUnknownSpec = errors.New("unknown spec")

// The methods below drive a Scheduler by hand in tests; the program itself
// only runs specs on their schedules.

// RunNow runs the spec now, by hand, and returns the run's error. It
// returns ErrBusy at once when a run of the spec is active (or Busy says
// so), ErrUnknownSpec for an unknown name and ErrStopped after Stop. When
// MaxConcurrent runs are active it waits for a free slot, or for ctx.
func (s *Scheduler) RunNow(ctx context.Context, specName string) error {
	s.mu.Lock()
	j, ok := s.jobs[specName]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("run %s: %w", specName, ErrUnknownSpec)
	}
	if err := s.claim(j, "by hand"); err != nil {
		return fmt.Errorf("run %s: %w", specName, err)
	}
	return s.execute(ctx, j, "by hand")
}

// Spec returns the spec of the given name.
func (s *Scheduler) Spec(name string) (Spec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[name]
	if !ok {
		return Spec{}, false
	}
	return j.spec, true
}

// Next returns the next scheduled time of the spec after now; zero for an
// unknown spec or one without a schedule.
func (s *Scheduler) Next(specName string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[specName]
	if !ok || j.sched == nil {
		return time.Time{}
	}
	return j.sched.Next(s.now())
}

// Entry is a spec as the scheduler sees it, for tests.
type Entry struct {
	Spec     string
	Schedule string
	// Next is the next scheduled time; zero for a spec run only by hand.
	Next time.Time
	// Prev is when the last run started (seen by this scheduler, or
	// LastRun); zero when unknown.
	Prev time.Time
	// Running reports a run started by this scheduler that has not returned.
	Running bool
}

// Entries returns every spec of the scheduler, in the order given to
// NewScheduler.
func (s *Scheduler) Entries() []Entry {
	now := s.now()
	out := make([]Entry, 0, len(s.order))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.order {
		j := s.jobs[name]
		e := Entry{Spec: name, Schedule: j.spec.Schedule, Prev: j.prev, Running: j.running}
		if j.sched != nil {
			e.Next = j.sched.Next(now)
		}
		out = append(out, e)
	}
	return out
}
