package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// On a shared store (PostgreSQL) several daemons, on several machines, drive
// the runs of one database. Each run is driven by at most one instance at a
// time (the runner's Drive holds the run's lease), and:
//
//   - a run's lease is renewed every quarter of its TTL; the instance that
//     cannot renew it for half of it kills the run's CLI, and so does the
//     CLI's guard process should the instance stall, so that a run whose
//     lease expired has no CLI left anywhere when another instance claims
//     it; the claimer's take gets a higher fencing token, which makes the
//     store refuse what the stalled instance still tries to write
//     (store/fence.go);
//   - every instance is a worker: it claims runnable runs — queued by
//     `submit`, interrupted, left running by an instance that died (its
//     lease expired), or waiting with an answered question — up to
//     MaxConcurrent driven here, when the store changes (LISTEN/NOTIFY) and
//     every AdoptEvery. Losing a race for a run is ErrLocked, and fine;
//   - a drive that reaches a pending question parks the run (the runner's
//     ErrParked): a waiting run holds no lease and no process;
//   - one instance leads (Store.Lead): it asks the waiting runs' questions
//     (Asker), so that it alone polls GitHub and holds the Discord gateway;
//     when it dies another takes the lead within a few seconds;
//   - every instance runs the schedules; a tick's run is made once, by the
//     instance whose insert wins (store.ErrTickTaken for the others).

// Asker asks a waiting run's pending questions on its surfaces until they
// are answered (*runner.Runner's Ask). The leading instance calls it.
type Asker interface {
	Ask(ctx context.Context, runID string) error
}

// leadRetry is how often an instance tries to take the lead, and checks
// that it still has it.
const leadRetry = time.Second

// clusterLoops runs the worker's and, while this instance leads, the
// asker's loops until ctx ends.
func (d *Daemon) clusterLoops(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.cfg.Store.Lead(ctx, "serve", leadRetry, func(lctx context.Context) {
			d.setLeader(true)
			defer d.setLeader(false)
			d.log.Info("leading: asking the waiting runs' questions")
			d.askLoop(lctx)
			if ctx.Err() == nil {
				d.log.Warn("lost the lead; another instance asks the questions now")
			}
		})
	}()
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		d.heartbeat(ctx)
	}()
	d.workLoop(ctx)
	<-done
	<-beating
}

// heartbeat tells the store, every third of the lease TTL, that this
// instance serves (for `status`).
func (d *Daemon) heartbeat(ctx context.Context) {
	started := time.Now()
	beat := func() {
		d.mu.Lock()
		leader, driving := d.leader, len(d.driving)
		d.mu.Unlock()
		bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := d.cfg.Store.Heartbeat(bctx, started, leader, driving); err != nil && ctx.Err() == nil {
			d.store.failed("heartbeat", err) // one line an outage (outage.go)
		} else if err == nil {
			d.store.ok()
		}
	}
	beat()
	every(ctx, max(d.cfg.Store.LeaseTTL()/3, time.Second), beat)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.cfg.Store.Goodbye(gctx); err != nil {
		d.log.Warn("leave the instances' list", "err", err)
	}
}

func (d *Daemon) setLeader(on bool) {
	d.mu.Lock()
	d.leader = on
	d.mu.Unlock()
	d.cfg.Metrics.setLeader(on)
}

// Leader reports whether this instance leads (always true on SQLite once
// serving).
func (d *Daemon) Leader() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leader
}

// workLook is how often a worker looks for runnable runs without a poke:
// a dead instance's lease expires without one, so this bounds how long
// after the lease TTL its runs are taken up.
const workLook = time.Second

// workLoop claims runnable runs whenever the store may have changed, and
// every workLook; while the store cannot be read, after a backoff
// (outage.go: a store that is down wakes every wait at once).
func (d *Daemon) workLoop(ctx context.Context) {
	b := retryBackoff()
	for ctx.Err() == nil {
		if !d.claim(ctx) {
			if retry.Sleep(ctx, b.Next()) != nil {
				return
			}
			continue
		}
		b.Reset()
		wctx, cancel := context.WithTimeout(ctx, min(workLook, d.cfg.AdoptEvery))
		_ = d.cfg.Store.WaitChange(wctx)
		cancel()
	}
}

// claim drives the runnable runs this instance has room for; false when
// the store could not be read.
func (d *Daemon) claim(ctx context.Context) bool {
	d.mu.Lock()
	room := -1
	if d.cfg.MaxConcurrent > 0 {
		room = d.cfg.MaxConcurrent - len(d.driving)
	}
	stopping := d.stopping
	d.mu.Unlock()
	if stopping || room == 0 {
		return true
	}
	runs, err := d.cfg.Store.ClaimableRuns(ctx, store.Hostname(), 0)
	if err != nil {
		if ctx.Err() == nil {
			d.store.failed("claim runs: list runnable runs", err)
		}
		return false
	}
	d.store.ok()
	d.take(ctx, runs, room, "claim", "claiming a run", func(store.Run) bool { return false })
	return true
}

// askLoop, while this instance leads, asks the questions of every waiting
// run, each in its own goroutine, until lctx ends (the lead is lost, or
// serve stops).
func (d *Daemon) askLoop(lctx context.Context) {
	asking := map[string]bool{}
	retryAt := map[string]time.Time{} // runs whose asking failed: when to ask again
	type askEnded struct {
		runID  string
		failed bool
	}
	ended := make(chan askEnded)
	defer func() {
		for len(asking) > 0 {
			delete(asking, (<-ended).runID)
		}
	}()
	look := func() bool {
		runs, err := d.cfg.Store.ListRuns(lctx, store.RunFilter{Status: []store.RunStatus{store.RunWaiting}, Brief: true})
		if err != nil {
			if lctx.Err() == nil {
				d.store.failed("ask: list waiting runs", err) // one line an outage (outage.go)
			}
			return false
		}
		d.store.ok()
		now := time.Now()
		for _, run := range runs {
			if asking[run.ID] || now.Before(retryAt[run.ID]) {
				continue
			}
			// A run some process drives (a foreground `run` or `resume`
			// waiting at its terminal) is asked by that process.
			if driven, err := d.cfg.Store.RunDriven(run.ID); err != nil || driven {
				continue
			}
			asking[run.ID] = true
			go func() {
				err := d.cfg.Asks.Ask(lctx, run.ID)
				switch {
				case err == nil, lctx.Err() != nil:
				case d.storeDown():
					// The outage is logged once (outage.go); the run is
					// asked again after AdoptEvery.
				default:
					d.log.Error("ask the questions of a waiting run", "run", run.ID, "spec", run.Spec, "err", err)
				}
				ended <- askEnded{run.ID, err != nil && lctx.Err() == nil}
			}()
		}
		return true
	}
	// A change is handed over only when the loop takes it: while the loop
	// backs off from a store it cannot read, the watcher waits too (a
	// store that is down wakes every wait at once).
	changes := make(chan struct{})
	go func() {
		for lctx.Err() == nil {
			wctx, cancel := context.WithTimeout(lctx, d.cfg.AdoptEvery)
			err := d.cfg.Store.WaitChange(wctx)
			cancel()
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				select {
				case changes <- struct{}{}:
				case <-lctx.Done():
				}
			}
		}
	}()
	b := retryBackoff()
	var retry <-chan time.Time // set while backing off
	lookNow := func() {
		if look() {
			b.Reset()
			retry = nil
		} else {
			retry = time.After(b.Next())
		}
	}
	lookNow()
	for {
		wake := changes
		if retry != nil {
			wake = nil
		}
		select {
		case <-lctx.Done():
			return
		case e := <-ended:
			delete(asking, e.runID)
			if e.failed {
				retryAt[e.runID] = time.Now().Add(d.cfg.AdoptEvery)
			} else {
				delete(retryAt, e.runID)
			}
		case <-wake:
			lookNow()
		case <-retry:
			lookNow()
		}
	}
}
