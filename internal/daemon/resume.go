package daemon

import (
	"context"
	"errors"
)

// ErrNotServing: the daemon is not running, or is shutting down.
var ErrNotServing = errors.New("serve is not running or is shutting down")

// ErrDriving: this process drives the run already.
var ErrDriving = errors.New("the run is driven already")

// Resume drives a run again in this process, as the runs found on start are
// taken up: for a person who asks for it (the web inbox's resume button).
// It returns at once; the run goes on in the background until it is final,
// waits on a question nobody here can answer, or ctx ends (serve's context:
// the run then stays resumable). The shutdown waits for it like for any run.
func (d *Daemon) Resume(ctx context.Context, runID, spec string) error {
	d.mu.Lock()
	// Registered under the same lock that the shutdown sets stopping with:
	// after that, no driver is added to the wait group.
	if !d.started || d.stopping {
		d.mu.Unlock()
		return ErrNotServing
	}
	if _, ok := d.driving[runID]; ok {
		d.mu.Unlock()
		return ErrDriving
	}
	d.driving[runID] = spec
	if spec != "" {
		d.bySpec[spec]++
	}
	d.wg.Add(1)
	d.cfg.Metrics.driving(1)
	d.mu.Unlock()
	d.log.Info("resuming run", "run", runID, "spec", spec)
	go func() { _ = d.drive(ctx, runID, spec, "resume") }()
	return nil
}
