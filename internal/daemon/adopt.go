package daemon

import (
	"context"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// orphanGrace is how long a run in status running may go without an update
// before the daemon adopts it when no process drives it: a process that just
// created a run takes its lock right after.
const orphanGrace = time.Minute

// every calls f every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// take drives, each in its own goroutine, the runs not driven here (at most
// room of them; -1: no bound) that skip does not leave out, except those
// whose drive failed lately: they wait out their backoff and are reported
// undriven (/healthz, orchestrator_runs_undriven).
func (d *Daemon) take(ctx context.Context, runs []store.Run, room int, trigger, msg string, skip func(store.Run) bool) {
	now := time.Now()
	var undriven []string
	for _, run := range runs {
		if room == 0 {
			break
		}
		d.mu.Lock()
		_, here := d.driving[run.ID]
		r, failed := d.failed[run.ID]
		stopping := d.stopping
		d.mu.Unlock()
		if here || stopping || skip(run) {
			continue
		}
		if failed && now.Before(r.at) {
			undriven = append(undriven, run.ID)
			continue
		}
		if !d.register(run.ID, run.Spec) {
			continue
		}
		room--
		d.log.Info(msg, "run", run.ID, "spec", run.Spec, "status", run.Status)
		go func() { _ = d.drive(ctx, run.ID, run.Spec, trigger) }()
	}
	// The gauge first: whoever sees /healthz degraded finds it counted.
	d.cfg.Metrics.setUndriven(len(undriven))
	d.mu.Lock()
	d.undriven = undriven
	d.mu.Unlock()
}
