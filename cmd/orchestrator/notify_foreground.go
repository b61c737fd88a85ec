package main

import (
	"context"
	"fmt"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// Notifications of a run driven in the foreground (`orchestrator run`,
// `resume`; not `rehearse`): the same events as serve's (done, failed,
// stopped, cap_reached, and waiting while it waits), routed the same way (notify: of the configuration
// and the spec) and queued in the same durable outbox with the same event
// keys, so a serve draining the outbox later sends nothing twice. Before
// the command exits each webhook delivery it queued gets one attempt,
// within foregroundNotifyWait: a receiver that is down does not hold the
// command, what it did not take stays in the outbox for the next serve,
// and the command says so in one line.

// foregroundNotifyWait bounds the notifying a foreground command does
// after its run ended: the notices posted on its surfaces, then one
// attempt at each webhook delivery.
const foregroundNotifyWait = 15 * time.Second

// foregroundNotify is a foreground command's serveNotify: events only
// (no waiting watch, no delivery loop), flushed by flush.
type foregroundNotify struct {
	sn     *serveNotify
	cancel context.CancelFunc

	// What the waiting watch's attempts left undelivered (flush says it).
	left int
	why  error
}

// foregroundWaitingEvery is how often a foreground command looks whether
// its run waits longer than waiting_after.
const foregroundWaitingEvery = time.Minute

// newForegroundRunner is newRunner for a command that drives a run in the
// foreground, its events observed by observe and turned into
// notifications; call flush before the command exits.
func (m *Main) newForegroundRunner(st *store.Store, observe func(runner.Event)) (*runner.Runner, *foregroundNotify, error) {
	fn := &foregroundNotify{}
	r, ss, err := m.newRunner(st, func(ev runner.Event) {
		observe(ev)
		fn.sn.observe(ev)
	})
	if err != nil {
		return nil, nil, err
	}
	if m.rehearsing {
		// A rehearsal's run is scripted and its store is removed after
		// it: nobody is told of it, and nothing is left queued.
		return r, fn, nil
	}
	fn.sn = m.newServeNotify(st, ss)
	fn.sn.base, fn.cancel = context.WithCancel(context.Background())
	return r, fn, nil
}

// forRun routes the events of run by its own spec's notify: section
// (its file need not be in specs.dir).
func (fn *foregroundNotify) forRun(m *Main, run store.Run) {
	if fn == nil || fn.sn == nil {
		return
	}
	sp, err := m.specOf(run)
	if err != nil {
		m.Logger.Warn("notify: the run's spec", "run", run.ID, "err", err)
		return
	}
	if sp != nil {
		fn.sn.own = []specs.Spec{*sp}
	}
}

// watch emits the waiting event of run runID while it is driven, as
// serve does for every waiting run: once its question waited longer than
// waiting_after (looked at every foregroundWaitingEvery), with one
// delivery attempt at once. Call the returned stop when the drive is over.
func (fn *foregroundNotify) watch(ctx context.Context, runID string) (stop func()) {
	if fn == nil || fn.sn == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(foregroundWaitingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fn.checkWaiting(ctx, runID, time.Now())
		}
	}()
	return func() { cancel(); <-done }
}

// checkWaiting emits run runID's waiting event if it is due at now, and
// makes one attempt at its webhook deliveries.
func (fn *foregroundNotify) checkWaiting(ctx context.Context, runID string, now time.Time) {
	run, err := fn.sn.st.Run(ctx, runID)
	if err != nil || run.Status != store.RunWaiting || !wantsKind(fn.sn.route(run.Spec), notify.Waiting) {
		return
	}
	fn.sn.waitingEvent(ctx, run, now)
	if left, why := fn.sn.n.Flush(ctx); left > 0 {
		fn.left += left
		if fn.why == nil {
			fn.why = why
		}
	}
}

// flush waits for the events being emitted, then makes one attempt at
// each webhook delivery they queued, all within foregroundNotifyWait (less
// once ctx, the command's, ends); it says in one line what is left to the
// next serve.
func (fn *foregroundNotify) flush(ctx context.Context, m *Main) {
	if fn == nil || fn.sn == nil {
		return
	}
	defer fn.cancel()
	deadline := time.Now().Add(foregroundNotifyWait)
	emitted := make(chan struct{})
	go func() { fn.sn.wg.Wait(); close(emitted) }()
	select {
	case <-emitted:
	case <-ctx.Done():
	case <-time.After(time.Until(deadline)):
	}
	fn.cancel() // what is still being posted stops now
	<-emitted
	dctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if ctx.Err() != nil {
		cancel() // interrupted: nothing is sent now, all of it is left to serve
	}
	left, why := fn.sn.n.Flush(dctx)
	if fn.left > 0 {
		left += fn.left
		if fn.why != nil {
			why = fn.why
		}
	}
	if left > 0 {
		what := "notification was"
		if left > 1 {
			what = "notifications were"
		}
		fmt.Fprintf(m.Stderr, "%d webhook %s not delivered (%v): queued for the next `orchestrator serve`\n", left, what, why)
	}
}
