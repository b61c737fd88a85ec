package runner

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// The ask room: how serve asks the questions of every waiting run while
// the runs themselves are parked (Config.Park) — no goroutine, no open
// file and no query term per waiting run.
//
//   - One loop follows the store's set feed (store.SetFeed: one indexed
//     query per change, by position, whatever the number waiting) from
//     a first paged read of the waiting sets (store.WaitingSets).
//   - Reminders, escalations, timeouts and the retries of surfaces that
//     failed are entries of one timer heap, computed from the stored times
//     so that restarts and a new leader keep the schedule.
//   - A set is shown on its surfaces with surfaces.Watcher: the surface's
//     own listener (GitHub's poller, Discord's gateway) hands answers to
//     the store. A surface that is no Watcher is asked with Ask from one
//     goroutine for the set (none of ours under serve).
//   - A set gets a goroutine only while something happens to it (it is
//     shown, reminded, timed out, or settled and reported), at most
//     roomWorkers at once.
//   - The store decides: an answer, from any surface or process, is a
//     commit the feed reports; the room then lets the surfaces go of the
//     set and shows the answer on the others, and a worker (the daemon's
//     claim loop) resumes the run.

// roomWorkers bounds the sets the room works on at once.
const roomWorkers = 16

// roomPage is how many sets one read of the store returns.
const roomPage = 1000

// roomRecheck is how soon a set whose run another process drives (a
// foreground `run` at its terminal) is looked at again: that process asks
// it while it lives.
const roomRecheck = 5 * time.Second

// AskWaiting asks, until ctx ends, the pending question sets of every
// waiting run that no process drives, on the runs' surfaces, and carries
// out their reminders, escalations and timeouts; it returns nil when ctx
// ends, once every surface let go of the sets it watched. health, if set,
// is told how each read of the store went (nil: it worked). serve's leading
// instance runs it (the daemon).
func (r *Runner) AskWaiting(ctx context.Context, health func(error)) error {
	if health == nil {
		health = func(error) {}
	}
	rm := &room{r: r, st: r.cfg.Store, health: health, sets: map[string]*entry{}, done: make(chan finished, roomWorkers)}
	defer rm.close()
	changes := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			if err := rm.st.WaitChange(ctx); err != nil && ctx.Err() == nil {
				_ = r.cfg.Sleep(ctx, time.Second)
			}
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}()
	b := retry.StoreOutage()
	loaded := false
	var backoff *time.Timer
	for {
		if !loaded || rm.lookAgain {
			rm.lookAgain = false
			var err error
			if !loaded {
				err = rm.load(ctx)
			} else {
				err = rm.follow(ctx)
			}
			rm.health(err)
			switch {
			case err == nil:
				if !loaded {
					rm.loadedAt, rm.loadedSets = time.Now(), len(rm.sets)
					r.log.Info("ask room: showing the waiting questions", "sets", len(rm.sets))
				}
				loaded = true
				b.Reset()
			case ctx.Err() != nil:
				return nil
			default:
				rm.r.log.Warn("ask room: read the waiting questions", "err", err)
				backoff = time.NewTimer(b.Next())
			}
		}
		rm.dispatch(ctx)
		if !rm.loadedAt.IsZero() && rm.working == 0 && len(rm.queue) == 0 && rm.firstShown() {
			r.log.Info("ask room: every waiting question shown", "sets", rm.loadedSets, "took", time.Since(rm.loadedAt).Round(time.Millisecond))
			rm.loadedAt = time.Time{}
		}
		var tick <-chan time.Time
		var timer *time.Timer
		if next, ok := rm.next(); ok {
			timer = time.NewTimer(max(time.Until(next), 0))
			tick = timer.C
		}
		wake := changes
		var retryC <-chan time.Time
		if backoff != nil {
			wake, retryC = nil, backoff.C
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			stopTimer(backoff)
			return nil
		case <-wake:
			rm.lookAgain = true
		case <-retryC:
			backoff = nil
			rm.lookAgain = true
		case f := <-rm.done:
			rm.finish(f)
		case <-tick:
		}
		stopTimer(timer)
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// room is the state of AskWaiting; its fields belong to its loop.
type room struct {
	r         *Runner
	st        *store.Store
	health    func(error)
	sets      map[string]*entry
	timers    timerHeap
	queue     []*entry // entries whose work waits for a worker
	working   int
	done      chan finished
	cursor    int64
	lookAgain bool
	// loadedAt is when the first read ended, until every set it found
	// was shown (logged once: the start's work is done).
	loadedAt   time.Time
	loadedSets int
}

// firstShown reports whether no set waits for its first showing.
func (rm *room) firstShown() bool {
	return len(rm.timers) == 0 || !rm.timers[0].at.IsZero()
}

// entry is what the room keeps of one waiting set: a few words, and what
// its surfaces were given.
type entry struct {
	setID, runID string
	at           time.Time // when its timer is due (in the heap)
	what         roomWhat
	idx          int // in the heap; -1 when not there
	busy         bool
	queued       bool
	// gone: the feed said the set is settled (or its run is not waiting
	// any more): its work, once idle, is the settlement.
	gone  bool
	state store.SetState
	asked asked
}

// asked is what a set's surfaces were given, as the room's work returns it.
type asked struct {
	ready    bool
	pol      Policy
	surfs    []surfaces.Surface // asked, with the escalation surface once escalated
	failed   []surfaces.Surface // Watch failed: shown again after a backoff
	failures int
	legacy   context.CancelFunc // the Ask of the surfaces that are no Watcher
	stopped  chan struct{}      // closed once that Ask returned
	// answeredHere: a timeout answered the set here and showed it on the
	// surfaces; the settlement only lets them go.
	answeredHere bool
}

type roomWhat int

const (
	roomShow   roomWhat = iota + 1 // show the set on its surfaces (again, for those that failed)
	roomPolicy                     // a reminder, an escalation or a timeout is due
	roomSettle                     // let go of the set; show the answer on the other surfaces
)

// finished is a worker's outcome for an entry.
type finished struct {
	e     *entry
	asked asked
	drop  bool      // forget the entry
	at    time.Time // the entry's next timer (zero: none)
	what  roomWhat
}

// load reads every waiting set, in pages, then follows the feed from the
// position read before the first page: a set that changes meanwhile is
// seen twice, which the room takes calmly.
func (rm *room) load(ctx context.Context) error {
	head, err := rm.st.SetFeedHead(ctx)
	if err != nil {
		return fmt.Errorf("ask room: set feed head: %w", err)
	}
	after := ""
	for {
		page, err := rm.st.WaitingSets(ctx, after, roomPage)
		if err != nil {
			return fmt.Errorf("ask room: waiting sets: %w", err)
		}
		for _, c := range page {
			rm.seen(c)
		}
		if len(page) < roomPage {
			break
		}
		after = page[len(page)-1].SetID
	}
	rm.cursor = head
	return rm.follow(ctx)
}

// follow reads the feed from the cursor to its end.
func (rm *room) follow(ctx context.Context) error {
	for {
		page, err := rm.st.SetFeed(ctx, rm.cursor, roomPage)
		if err != nil {
			return fmt.Errorf("ask room: set feed: %w", err)
		}
		for _, c := range page {
			rm.seen(c)
			rm.cursor = max(rm.cursor, c.Seq)
		}
		if len(page) < roomPage {
			return nil
		}
	}
}

// seen takes in what the store says of a set.
func (rm *room) seen(c store.SetChange) {
	e := rm.sets[c.SetID]
	if c.State == store.SetPending && c.RunStatus == store.RunWaiting {
		if e == nil {
			e = &entry{setID: c.SetID, runID: c.RunID, idx: -1}
			rm.sets[c.SetID] = e
			rm.schedule(e, time.Time{}, roomShow)
		}
		// A set known already: a question of it answered (the surfaces
		// show it), or its run parked again. Nothing to do.
		return
	}
	if e == nil || e.gone {
		return
	}
	e.gone, e.state = true, c.State
	rm.unschedule(e)
	if !e.busy {
		rm.enqueue(e)
	}
}

// schedule sets e's timer.
func (rm *room) schedule(e *entry, at time.Time, what roomWhat) {
	e.at, e.what = at, what
	if e.idx >= 0 {
		heap.Fix(&rm.timers, e.idx)
	} else {
		heap.Push(&rm.timers, e)
	}
}

func (rm *room) unschedule(e *entry) {
	if e.idx >= 0 {
		heap.Remove(&rm.timers, e.idx)
	}
}

// next is when the first timer is due.
func (rm *room) next() (time.Time, bool) {
	if len(rm.timers) == 0 || rm.working >= roomWorkers {
		return time.Time{}, false
	}
	return rm.timers[0].at, true
}

func (rm *room) enqueue(e *entry) {
	if !e.queued {
		e.queued = true
		rm.queue = append(rm.queue, e)
	}
}

// dispatch moves the due timers to the queue and starts work while workers
// are free.
func (rm *room) dispatch(ctx context.Context) {
	now := rm.r.cfg.Now()
	for len(rm.timers) > 0 && !rm.timers[0].at.After(now) && len(rm.queue) < roomWorkers {
		e := heap.Pop(&rm.timers).(*entry)
		rm.enqueue(e)
	}
	for rm.working < roomWorkers && len(rm.queue) > 0 {
		e := rm.queue[0]
		rm.queue[0] = nil
		rm.queue = rm.queue[1:]
		e.queued = false
		if e.busy {
			continue
		}
		e.busy = true
		rm.working++
		what, a := e.what, e.asked
		if e.gone {
			what = roomSettle
		}
		go func() {
			rm.done <- rm.work(ctx, e, what, a)
		}()
	}
}

// finish applies a worker's outcome.
func (rm *room) finish(f finished) {
	rm.working--
	e := f.e
	e.busy = false
	e.asked = f.asked
	switch {
	case f.drop:
		rm.unschedule(e)
		if rm.sets[e.setID] == e {
			delete(rm.sets, e.setID)
		}
	case e.gone:
		rm.enqueue(e) // settled while it was worked on
	case !f.at.IsZero():
		rm.schedule(e, f.at, f.what)
	}
}

// close stops the work under way and lets every surface go of the sets it
// watched: the next leader shows them again.
func (rm *room) close() {
	for rm.working > 0 {
		f := <-rm.done
		rm.working--
		f.e.asked = f.asked
	}
	for _, e := range rm.sets {
		letGo(e.setID, e.asked)
	}
}

// letGo makes the surfaces let go of a set.
func letGo(setID string, a asked) {
	for _, s := range a.surfs {
		if w, ok := s.(surfaces.Watcher); ok {
			w.Unwatch(setID)
		}
	}
	if a.legacy != nil {
		a.legacy()
		<-a.stopped
	}
}

// work does what is due for e, on a goroutine of its own.
func (rm *room) work(ctx context.Context, e *entry, what roomWhat, a asked) finished {
	f := finished{e: e, asked: a}
	if what == roomSettle {
		rm.settle(ctx, e, a)
		f.asked, f.drop = asked{}, true
		return f
	}
	run, rec, ok, err := rm.current(ctx, e)
	switch {
	case err != nil && ctx.Err() != nil:
		return f
	case err != nil:
		rm.r.log.Warn("ask room: read a waiting set", "run", e.runID, "set", e.setID, "err", err)
		a.failures++
		f.asked, f.at, f.what = a, rm.r.cfg.Now().Add(rm.backoff(a.failures)), what
		return f
	case !ok:
		// Not waiting any more: the feed says what became of it.
		return f
	}
	if what == roomShow && !a.ready {
		if driven, err := rm.st.RunDriven(run.ID); err != nil || driven {
			// Another process (a foreground `run`) asks it while it lives.
			f.at, f.what = rm.r.cfg.Now().Add(roomRecheck), roomShow
			return f
		}
	}
	switch what {
	case roomShow:
		f.asked = rm.show(ctx, run, rec, a)
	case roomPolicy:
		f.asked = rm.policy(ctx, run, rec, a)
		if f.asked.answeredHere {
			return f // the feed reports the answer
		}
	}
	f.at, f.what = rm.nextTimer(f.asked, rec)
	return f
}

// current reads e's run and set; ok is false when the set no longer waits.
func (rm *room) current(ctx context.Context, e *entry) (store.Run, store.SetRecord, bool, error) {
	run, err := rm.st.Run(ctx, e.runID)
	if err != nil {
		return run, store.SetRecord{}, false, err
	}
	if run.Status != store.RunWaiting {
		return run, store.SetRecord{}, false, nil
	}
	rec, err := rm.st.QuestionSet(ctx, e.setID)
	if err != nil {
		return run, rec, false, err
	}
	return run, rec, rec.State == store.SetPending, nil
}

// nextTimer is when e is due next: its policy's next reminder, escalation
// or timeout, or sooner the retry of the surfaces that failed.
func (rm *room) nextTimer(a asked, rec store.SetRecord) (time.Time, roomWhat) {
	if !a.ready {
		return rm.r.cfg.Now().Add(rm.backoff(a.failures)), roomShow
	}
	var at time.Time
	var what roomWhat
	if t, w := policyAt(a.pol, rec); w != 0 {
		at, what = t, roomPolicy
	}
	if len(a.failed) > 0 {
		if t := rm.r.cfg.Now().Add(rm.backoff(a.failures)); at.IsZero() || t.Before(at) {
			at, what = t, roomShow
		}
	}
	return at, what
}

func (rm *room) backoff(failures int) time.Duration {
	return retry.Backoff{Initial: rm.r.cfg.Limits.AskRetryBackoff, Max: maxAskBackoff, Jitter: retry.Jitter}.Wait(max(failures-1, 0))
}

// show shows the set on its surfaces: all of them the first time (after
// the presets answered what they answer), those that failed afterwards.
func (rm *room) show(ctx context.Context, run store.Run, rec store.SetRecord, a asked) asked {
	r := rm.r
	if !a.ready {
		res, err := r.cfg.Resolve(run)
		if err != nil {
			if ferr := r.fail(ctx, run, err.Error()); ferr != nil {
				r.log.Error("ask room: fail a run whose spec cannot be resolved", "run", run.ID, "err", err, "fail", ferr)
			}
			return a
		}
		w, done, err := r.startWaiting(ctx, &drive{Resolved: res}, run, rec)
		if err != nil || done {
			if err != nil {
				r.log.Warn("ask room: answer with the presets", "run", run.ID, "set", rec.Set.ID, "err", err)
			}
			return a // the feed reports the answer; an error is tried again
		}
		a = asked{ready: true, pol: w.pol, surfs: w.surfs, failed: w.surfs}
		if _, due := r.duePolicyEvent(a.pol, rec); due {
			a.failed = nil // a timeout that passed meanwhile comes first: nothing is shown
			return a
		}
	}
	ask := unanswered(rec.Set, rec.Response)
	var failed, legacy []surfaces.Surface
	for _, s := range a.failed {
		w, ok := s.(surfaces.Watcher)
		if !ok {
			legacy = append(legacy, s)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := w.Watch(wctx, ask, r.answers(run.ID))
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, errors.ErrUnsupported):
			legacy = append(legacy, s) // a surface that watches only in some modes (a prompting terminal)
		case ctx.Err() != nil:
			failed = append(failed, s)
		default:
			r.log.Warn("ask room: show the question on a surface; showing it again later", "surface", s.Name(), "run", run.ID, "set", rec.Set.ID, "err", err)
			failed = append(failed, s)
		}
	}
	if len(legacy) > 0 && a.legacy == nil {
		a.legacy, a.stopped = r.askLegacy(ctx, run, ask, legacy)
	}
	if len(failed) > 0 {
		a.failures++
		r.emit(Event{Kind: EventRetry, RunID: run.ID, Set: &ask, Surfaces: names(failed),
			Text: fmt.Sprintf("asking failed on %s; asking again later", joinNames(failed))})
	} else {
		a.failures = 0
	}
	a.failed = failed
	return a
}

func joinNames(ss []surfaces.Surface) string {
	return fmt.Sprint(names(ss))
}

// askLegacy asks set on surfaces that are no Watcher, from one goroutine,
// until the returned cancel is called; surfaces that all fail are asked
// again after a backoff.
func (r *Runner) askLegacy(ctx context.Context, run store.Run, set questions.Set, ss []surfaces.Surface) (context.CancelFunc, chan struct{}) {
	lctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for n := 0; lctx.Err() == nil; n++ {
			err := surfaces.Ask(lctx, r.log, set, r.answers(run.ID), ss...)
			if err == nil || lctx.Err() != nil || errors.Is(err, surfaces.ErrUnavailable) {
				return
			}
			r.log.Warn("asking failed on every surface; asking again later", "run", run.ID, "set", set.ID, "err", err)
			_ = r.cfg.Sleep(lctx, retry.Backoff{Initial: r.cfg.Limits.AskRetryBackoff, Max: maxAskBackoff, Jitter: retry.Jitter}.Wait(n))
		}
	}()
	return cancel, stopped
}

// policy carries out the reminder, escalation or timeout due.
func (rm *room) policy(ctx context.Context, run store.Run, rec store.SetRecord, a asked) asked {
	r := rm.r
	at, what := policyAt(a.pol, rec)
	if what == 0 || at.After(r.cfg.Now()) {
		return a
	}
	surfs := slices.Clone(a.surfs)
	done, err := r.policyEvent(ctx, run, &rec, &surfs, a.pol, what)
	if err != nil {
		r.log.Warn("ask room: reminder, escalation or timeout", "run", run.ID, "set", rec.Set.ID, "err", err)
		return a
	}
	if done {
		a.answeredHere = true
		return a
	}
	if what == policyEscalate && len(surfs) > len(a.surfs) {
		a.failed = append(a.failed, surfs[len(a.surfs):]...)
		a.surfs = surfs
		return rm.show(ctx, run, rec, a)
	}
	return a
}

// settle lets the surfaces go of a settled set and shows, on those that did
// not take the answer, who answered (or that it closed).
func (rm *room) settle(ctx context.Context, e *entry, a asked) {
	letGo(e.setID, a)
	if !a.ready || a.answeredHere {
		return
	}
	r := rm.r
	ctx = context.WithoutCancel(ctx)
	rec, err := rm.st.QuestionSet(ctx, e.setID)
	if err != nil {
		r.log.Warn("ask room: read a settled set", "set", e.setID, "err", err)
		return
	}
	switch rec.State {
	case store.SetExpired:
		r.closeExpired(ctx, e.runID, rec.Set, a.surfs)
	case store.SetPending:
		// Its run is not waiting any more: whoever drives it asks.
	default:
		run, err := rm.st.Run(ctx, e.runID)
		if err != nil {
			r.log.Warn("ask room: read a settled set's run", "run", e.runID, "err", err)
			return
		}
		if err := r.settled(ctx, run, rec, a.surfs); err != nil {
			r.log.Warn("ask room: show the answer", "set", e.setID, "err", err)
		}
	}
}

// timerHeap orders entries by when they are due.
type timerHeap []*entry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.idx = -1
	*h = old[:len(old)-1]
	return e
}
