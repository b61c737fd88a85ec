package store

import (
	"context"
	"strings"
	"sync"
	"time"
)

// How a process waiting for question sets learns of a change:
//   - made by this process: at once, in memory (notify);
//   - made by another process (`orchestrator answer`, `cancel`): every
//     store pokes after a commit that ends a wait, and waiters listen, so
//     the poke wakes them at once. On SQLite the poke is the file wake/poke
//     of the state directory, which waiters watch (fsnotify); on PostgreSQL
//     it is NOTIFY on the channel orchestrator_wake, which they LISTEN to;
//   - a poke lost (another filesystem, no notification support, the
//     listening connection lost): the slow poll every pollInterval catches
//     it (of PRAGMA data_version on SQLite, of the set feed on PostgreSQL).
//
// While nothing changes a waiting process does nothing but the slow poll:
// one cheap query per pollInterval, whatever the number of waiters; a
// change costs one read of the set feed (feed.go), whatever the number of
// sets waited on.

// pollInterval is the slow fallback for changes made by other processes
// whose poke was missed (Store.pollEvery; tests change it).
const pollInterval = 2 * time.Second

// wakeDir is the directory, inside the state directory, that waiters watch.
const wakeDir = "wake"

// watcher lets any number of goroutines wait for question sets to leave the
// pending state with a single watching goroutine per Store.
type watcher struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	running bool
	closed  bool
	stop    chan struct{}  // closed by Close: the poller returns
	polling sync.WaitGroup // the poller, which Close waits for
}

// close stops the poller and waits until it has returned, so that Close
// leaves no goroutine and no connection of the store behind.
func (w *watcher) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		if w.stop != nil {
			close(w.stop)
		}
	}
	w.mu.Unlock()
	w.polling.Wait()
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

// runKey is the watcher's key of a run (set IDs are the keys of sets).
func runKey(id string) string { return "run\x00" + id }

// WaitRunFinal blocks until the run is final (done, failed, cancelled —
// here or by another process's `orchestrator cancel`) or ctx ends. It
// returns the run as it then is.
func (s *Store) WaitRunFinal(ctx context.Context, id string) (Run, error) {
	key := runKey(id)
	for {
		ch := s.watch(key)
		run, err := s.Run(ctx, id)
		if err != nil {
			s.unwatch(key, ch)
			return Run{}, err
		}
		if run.Status.Final() {
			s.unwatch(key, ch)
			return run, nil
		}
		select {
		case <-ctx.Done():
			s.unwatch(key, ch)
			return Run{}, ctx.Err()
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
	if !s.w.running && !s.w.closed {
		if s.w.stop == nil {
			s.w.stop = make(chan struct{})
		}
		s.w.running = true
		s.w.polling.Add(1)
		stop := s.w.stop
		go func() {
			defer s.w.polling.Done()
			s.poll(stop)
		}()
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

// changed is called after a commit that may end waits: waiters of this
// process re-read their sets now, and other processes are poked.
func (s *Store) changed(ids ...string) {
	s.w.mu.Lock()
	var all []string
	if len(ids) == 0 {
		for id := range s.w.waiters {
			all = append(all, id)
		}
		ids = all
	}
	s.w.mu.Unlock()
	s.wake(append(ids, anyKey))
	s.poke()
}

// poke tells the other processes waiting on this store to look again
// (dialect.poke). Best effort: the slow poll is the fallback.
func (s *Store) poke() { s.d.poke(s) }

// poll runs while anyone waits. It looks, on a connection of its own, at
// the database's version (dialect.version: the number changes when another
// connection commits) when started, when poked (dialect.listen) or every
// pollInterval, and, on a change, wakes the waiters of sets that are no
// longer pending and of runs that are final.
//
// Sets are followed by the set feed (feed.go), never by a query term per
// set: each look reads the sets whose feed position is above the last one
// seen, and wakes the waiters of those of them no longer pending (wake
// keeps those somebody waits on). The look when started reads the feed's
// head and then checks the sets waited on so far by ID, in chunks: they
// may have changed between their waiter's own read and that head, and a
// change made before the listening began is caught too. A waiter that
// comes later reads its set itself after it registered: what was
// committed before that read it sees, what is committed after has a
// position above the one the poller holds. Runs' waits (WaitRunFinal,
// few) are looked up by ID in chunks.
func (s *Store) poll(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := s.db.Conn(ctx)
	if err != nil {
		s.stopPolling(err)
		return
	}
	defer c.Close()
	var pokes <-chan struct{}
	if s.noPokes {
		// tests of the slow poll
	} else if ch, err := s.d.listen(ctx, s); err == nil {
		pokes = ch
		// The listener closes the channel once it has let go of what it
		// holds (a watch, a connection): Close waits for that too.
		defer func() {
			cancel()
			for range ch {
			}
		}()
	}
	ticker := time.NewTicker(s.pollEvery)
	defer ticker.Stop()
	cn := conn{Conn: c, d: s.d}
	last := int64(-1)
	var pos int64 // the feed position seen
	for first := true; ; first = false {
		if !first {
			select {
			case <-stop:
				s.w.mu.Lock()
				s.w.running = false
				s.w.mu.Unlock()
				return
			case <-ticker.C:
			case _, ok := <-pokes:
				if !ok {
					pokes = nil
				}
			}
		}
		s.w.mu.Lock()
		if len(s.w.waiters) == 0 {
			s.w.running = false
			s.w.mu.Unlock()
			return
		}
		s.w.mu.Unlock()

		v, ok, err := s.d.version(ctx, c)
		if err != nil {
			s.stopPolling(err)
			return
		}
		if ok && v == last {
			continue
		}
		last = v
		// WaitChange's waiters look themselves, at every change.
		s.wake([]string{anyKey})
		var done []string
		if first {
			pos, err = feedHead(ctx, cn)
			if err == nil {
				done, err = notPendingByID(ctx, cn, s.waited(false))
			}
		} else {
			done, pos, err = feedNotPending(ctx, cn, pos)
		}
		if err != nil {
			s.stopPolling(err)
			return
		}
		runs, err := finalRuns(ctx, cn, s.waited(true))
		if err != nil {
			s.stopPolling(err)
			return
		}
		if done = append(done, runs...); len(done) > 0 {
			s.wake(done)
		}
	}
}

// waited returns the keys waited on now: the runs' (runKey) when runs is
// true, else the sets'.
func (s *Store) waited(runs bool) []string {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	var out []string
	for id := range s.w.waiters {
		if id == anyKey {
			continue
		}
		if _, isRun := strings.CutPrefix(id, runKey("")); isRun == runs {
			out = append(out, id)
		}
	}
	return out
}

// feedPage is how many sets of the feed one query of the poller reads.
const feedPage = 1000

// pollFeedQuery is the poller's read of the feed: SetFeed's without the run.
const pollFeedQuery = `SELECT seq, id, state FROM question_sets WHERE seq > ? ORDER BY seq LIMIT ?`

// feedHead is the feed's highest position.
func feedHead(ctx context.Context, c conn) (int64, error) {
	rows, err := c.QueryContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM question_sets`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var head int64
	for rows.Next() {
		if err := rows.Scan(&head); err != nil {
			return 0, err
		}
	}
	return head, rows.Err()
}

// feedNotPending reads the feed above pos, a page at a time, and returns
// the IDs of the sets in it no longer pending, and the position reached.
func feedNotPending(ctx context.Context, c conn, pos int64) ([]string, int64, error) {
	var done []string
	for {
		rows, err := c.QueryContext(ctx, pollFeedQuery, pos, feedPage)
		if err != nil {
			return nil, pos, err
		}
		n := 0
		for rows.Next() {
			var id string
			var st SetState
			if err := rows.Scan(&pos, &id, &st); err != nil {
				rows.Close()
				return nil, pos, err
			}
			n++
			if st != SetPending {
				done = append(done, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, pos, err
		}
		if n < feedPage {
			return done, pos, nil
		}
	}
}

// notPendingByID returns those of the sets ids that are no longer
// pending: a query per idChunk IDs.
func notPendingByID(ctx context.Context, c conn, ids []string) ([]string, error) {
	return idsWhere(ctx, c, `SELECT id FROM question_sets WHERE state <> ?`, []any{SetPending}, ids, func(id string) string { return id })
}

// finalRuns returns the keys of the runs of keys (runKeys) that are final:
// a query per idChunk runs.
func finalRuns(ctx context.Context, c conn, keys []string) ([]string, error) {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = strings.TrimPrefix(k, runKey(""))
	}
	return idsWhere(ctx, c, `SELECT id FROM runs WHERE status IN (?, ?, ?, ?)`, []any{RunDone, RunFailed, RunCancelled, RunStopped}, ids, runKey)
}

// idsWhere returns, as key(id), the ids that the query q (… WHERE cond,
// with fixed its arguments) selects, in chunks of idChunk IDs.
func idsWhere(ctx context.Context, c conn, q string, fixed []any, ids []string, key func(string) string) ([]string, error) {
	var out []string
	err := inChunks(ids, func(ph string, args []any) error {
		rows, err := c.QueryContext(ctx, q+` AND id IN (`+ph+`)`, append(append([]any(nil), fixed...), args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, key(id))
		}
		return rows.Err()
	})
	return out, err
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
