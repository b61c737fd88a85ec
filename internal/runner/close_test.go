package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// tidy is a person whose surface shows dead questions closed and tidies up
// when a run ends.
type tidy struct {
	*person
	tmu    sync.Mutex
	closed []string // "set: reason"
	ended  []surfaces.RunProgress
}

func (s *tidy) CloseSet(ctx context.Context, set questions.Set, reason string) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.closed = append(s.closed, set.ID+": "+reason)
	return nil
}

func (s *tidy) RunEnded(ctx context.Context, p surfaces.RunProgress) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.ended = append(s.ended, p)
	return nil
}

var (
	_ surfaces.Closer   = (*tidy)(nil)
	_ surfaces.RunEnder = (*tidy)(nil)
)

func (s *tidy) calls() ([]string, []surfaces.RunProgress) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return append([]string(nil), s.closed...), append([]surfaces.RunProgress(nil), s.ended...)
}

func TestTimedOutQuestionClosedOnSurfaces(t *testing.T) {
	t.Parallel()
	s := &tidy{person: newPerson("test")}
	pol := runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: "fail"}}
	h := newHarness(t, []surfaces.Surface{s}, pol, runner.Limits{}, rules()...)
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunFailed {
		t.Fatalf("run = %s %q, %v; want failed", run.Status, run.Error, err)
	}
	closed, ended := s.calls()
	if len(closed) != 1 || !strings.HasSuffix(closed[0], ": timed out: no answer within 300ms (on_timeout: fail)") {
		t.Errorf("closed = %q, want the question closed once as timed out", closed)
	}
	if len(ended) != 1 || ended[0].Step != "failed" || !ended[0].Final || ended[0].RunID != run.ID || !strings.Contains(ended[0].Summary, "no answer within") {
		t.Errorf("ended = %+v, want the run ended once, failed", ended)
	}
}

func TestCancelledQuestionClosedOnSurfaces(t *testing.T) {
	t.Parallel()
	s := &tidy{person: newPerson("test")}
	h := newHarness(t, []surfaces.Surface{s}, runner.Policy{}, runner.Limits{}, rules()...)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				if err := h.store.CancelRun(context.Background(), ev.RunID, "cancelled by bob"); err != nil {
					t.Errorf("CancelRun: %v", err)
				}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunCancelled {
		t.Fatalf("run = %s %q, %v; want cancelled", run.Status, run.Error, err)
	}
	closed, ended := s.calls()
	if len(closed) != 1 || !strings.HasSuffix(closed[0], ": cancelled by bob") {
		t.Errorf("closed = %q, want the question closed once as cancelled by bob", closed)
	}
	if len(ended) != 1 || ended[0].Step != "cancelled" {
		t.Errorf("ended = %+v, want the run ended once, cancelled", ended)
	}
}

func TestRunEndedOnceWhenDone(t *testing.T) {
	t.Parallel()
	s := &tidy{person: newPerson("test")}
	h := newHarness(t, []surfaces.Surface{s}, runner.Policy{}, runner.Limits{}, rules()...)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				s.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"JWT"}}}
				return
			}
		}
	}()
	run, err := h.drive("Implement spec X")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v", run.Status, run.Error, err)
	}
	closed, ended := s.calls()
	if len(closed) != 0 {
		t.Errorf("an answered question was closed: %q", closed)
	}
	if len(ended) != 1 || ended[0].Step != "done" || ended[0].Summary != "Implemented with JWT." || ended[0].CostUSD <= 0 {
		t.Errorf("ended = %+v, want the run ended once, done", ended)
	}
	// Driving a run that has ended does nothing more.
	if _, err := h.runner.Drive(context.Background(), run.ID); err != nil {
		t.Fatalf("Drive again: %v", err)
	}
	if _, ended := s.calls(); len(ended) != 1 {
		t.Errorf("RunEnded called %d times, want once", len(ended))
	}
}
