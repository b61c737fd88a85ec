package store

import (
	"context"
	"sync"
	"time"
)

// pollInterval is how often the watcher looks for changes made by other
// processes (an `orchestrator answer` in another terminal). It costs one
// PRAGMA per tick while anything waits, and one query per change.
const pollInterval = 20 * time.Millisecond

// watcher lets any number of goroutines wait for question sets to leave the
// pending state with a single poller per Store, whatever their number.
type watcher struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	running bool
}

// WaitSet blocks until the set is no longer pending — answered, here or by
// another process, or expired — or ctx ends. It returns the set as it then is.
func (s *Store) WaitSet(ctx context.Context, setID string) (SetRecord, error) {
	for {
		ch := s.watch(setID)
		rec, err := s.QuestionSet(ctx, setID)
		if err != nil {
			s.unwatch(setID, ch)
			return SetRecord{}, err
		}
		if rec.State != SetPending {
			s.unwatch(setID, ch)
			return rec, nil
		}
		select {
		case <-ctx.Done():
			s.unwatch(setID, ch)
			return SetRecord{}, ctx.Err()
		case <-ch:
		}
	}
}

func (s *Store) watch(setID string) chan struct{} {
	ch := make(chan struct{})
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.waiters == nil {
		s.w.waiters = map[string]map[chan struct{}]struct{}{}
	}
	if s.w.waiters[setID] == nil {
		s.w.waiters[setID] = map[chan struct{}]struct{}{}
	}
	s.w.waiters[setID][ch] = struct{}{}
	if !s.w.running {
		s.w.running = true
		go s.poll()
	}
	return ch
}

func (s *Store) unwatch(setID string, ch chan struct{}) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if m := s.w.waiters[setID]; m != nil {
		delete(m, ch)
		if len(m) == 0 {
			delete(s.w.waiters, setID)
		}
	}
}

// wake closes the channels of every waiter of the given sets.
func (s *Store) wake(ids []string) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	for _, id := range ids {
		for ch := range s.w.waiters[id] {
			close(ch)
		}
		delete(s.w.waiters, id)
	}
}

// poll runs while anyone waits. It watches PRAGMA data_version on a
// connection of its own (the number changes when another connection
// commits) and, on a change, wakes the waiters of sets that are no longer
// pending.
func (s *Store) poll() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		s.stopPolling(err)
		return
	}
	defer conn.Close()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	last := int64(-1)
	for range ticker.C {
		s.w.mu.Lock()
		if len(s.w.waiters) == 0 {
			s.w.running = false
			s.w.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(s.w.waiters))
		for id := range s.w.waiters {
			ids = append(ids, id)
		}
		s.w.mu.Unlock()

		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			s.stopPolling(err)
			return
		}
		if v == last {
			continue
		}
		last = v
		args := make([]any, len(ids)+1)
		args[0] = SetPending
		for i, id := range ids {
			args[i+1] = id
		}
		rows, err := conn.QueryContext(ctx, `SELECT id FROM question_sets WHERE state <> ? AND id IN (`+placeholders(len(ids))+`)`, args...)
		if err != nil {
			s.stopPolling(err)
			return
		}
		var done []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				done = append(done, id)
			}
		}
		rows.Close()
		if len(done) > 0 {
			s.wake(done)
		}
	}
}

// stopPolling wakes every waiter (they re-read the database themselves, and
// report its error) when the poller cannot go on.
func (s *Store) stopPolling(err error) {
	s.w.mu.Lock()
	ids := make([]string, 0, len(s.w.waiters))
	for id := range s.w.waiters {
		ids = append(ids, id)
	}
	s.w.running = false
	s.w.mu.Unlock()
	_ = err // each woken waiter re-reads the set and meets the error itself
	s.wake(ids)
}
