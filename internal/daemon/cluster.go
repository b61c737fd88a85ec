package daemon

import (
	"context"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// How serve drives the runs of its store. On SQLite there is one serve per
// state directory, which leads; on a shared store (PostgreSQL) several
// daemons, on several machines, drive the runs of one database, each run by
// at most one instance at a time (the runner's Drive holds the run's lease,
// or on SQLite its lock file), and:
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
//     ErrParked): a waiting run holds no lease, no lock file, no goroutine
//     and no process;
//   - one instance leads (Store.Lead; on SQLite the one serve): it asks the
//     waiting runs' questions (Asker: one loop over the store's set feed),
//     so that it alone polls GitHub and holds the Discord gateway; when it
//     dies another takes the lead within a few seconds;
//   - every instance runs the schedules; a tick's run is made once, by the
//     instance whose insert wins (store.ErrTickTaken for the others).

// Asker asks the pending questions of every waiting run on their surfaces,
// until ctx ends (*runner.Runner's AskWaiting: one loop over the store's
// set feed and one timer heap, no goroutine per run). The leading instance
// calls it; health is told how its reads of the store went.
type Asker interface {
	AskWaiting(ctx context.Context, health func(error)) error
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
			if ctx.Err() == nil && d.cfg.Store.Shared() {
				d.log.Warn("lost the lead; another instance asks the questions now")
			}
		})
	}()
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		if d.cfg.Store.Shared() {
			d.heartbeat(ctx)
		}
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
	b := retry.StoreOutage()
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
	// On SQLite the runs taken up and resumed do not count against
	// MaxConcurrent (it bounds the scheduled runs; serve's CLI slots bound
	// every CLI).
	if d.cfg.MaxConcurrent > 0 && d.cfg.Store.Shared() {
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
	trigger, msg, skip := "claim", "claiming a run", func(store.Run) bool { return false }
	if !d.cfg.Store.Shared() {
		trigger, msg, skip = d.adoptable()
	}
	d.take(ctx, runs, room, trigger, msg, skip)
	return true
}

// adoptable is, on SQLite, how the claim loop leaves out the runs another
// process drives (a foreground `run`: its lock file is held; a run leases
// nothing there) and the runs just created by one that has not locked them
// yet (running, updated within orphanGrace). Its first look takes up what
// the previous serve left.
func (d *Daemon) adoptable() (trigger, msg string, skip func(store.Run) bool) {
	d.mu.Lock()
	first := !d.lookedUp
	d.lookedUp = true
	d.mu.Unlock()
	trigger, msg = "adopt", "adopting a run no process drives"
	if first {
		trigger, msg = "take-up", "taking up run"
	}
	now := time.Now()
	return trigger, msg, func(run store.Run) bool {
		if !first && run.Status == store.RunRunning && now.Sub(run.UpdatedAt) < orphanGrace {
			return true
		}
		driven, err := d.cfg.Store.RunDriven(run.ID)
		if err != nil {
			d.log.Error("adopt runs: is the run driven", "run", run.ID, "err", err)
			return true
		}
		return driven
	}
}

// askLoop, while this instance leads, asks the questions of every waiting
// run (the runner's ask room: no goroutine per run) until lctx ends (the
// lead is lost, or serve stops).
func (d *Daemon) askLoop(lctx context.Context) {
	if d.cfg.Asks == nil {
		return
	}
	err := d.cfg.Asks.AskWaiting(lctx, func(err error) {
		switch {
		case err == nil:
			d.store.ok()
		case lctx.Err() == nil:
			d.store.failed("ask: read the waiting questions", err) // one line an outage (outage.go)
		}
	})
	if err != nil && lctx.Err() == nil {
		d.log.Error("ask the waiting runs' questions", "err", err)
	}
}
