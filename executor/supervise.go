package executor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// supervise enforces the timeouts and the graces, and cleans up after the
// process ends.
func (r *Process) supervise() {
	defer close(r.superDone)
	cfg := &r.e.cfg
	var idleC, graceC, killC, drainC, timeoutC <-chan time.Time
	if r.idle != nil {
		idleC = r.idle.C
	}
	if r.timeout != nil {
		timeoutC = r.timeout.C
		defer r.timeout.Stop()
	}
	ctxDone := r.ctx.Done()
	resultCh := r.resultCh
	exited := r.exited
	readDone := r.readDone
	drainPeriod := max(cfg.KillGrace, time.Second)
	var drainMark, graceMark int64
	for exited != nil || readDone != nil {
		select {
		case <-ctxDone:
			ctxDone = nil
			cat, detail := stopCause(r.ctx, cfg.Timeout)
			if r.requestStop(cat, detail) {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-timeoutC:
			// The clock stands while a person is asked, so the turn's
			// limit is at least as far as the timer said: look again
			// then.
			worked, waited := r.clock.worked()
			if left := cfg.Timeout - worked; left > 0 {
				r.timeout.Reset(left)
				continue
			}
			timeoutC = nil
			detail := fmt.Sprintf("the run took longer than %s", cfg.Timeout)
			if waited > 0 {
				detail += fmt.Sprintf(" (not counting %s waiting for answers)", waited.Round(time.Second))
			}
			if r.requestStop(CategoryTimeout, detail) {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-idleC:
			if r.pendingN.Load() > 0 || r.heldN.Load() > 0 {
				// A person is being asked: silence is expected.
				r.idle.Reset(cfg.IdleTimeout)
				continue
			}
			idleC = nil
			if r.requestStop(CategoryIdleTimeout, fmt.Sprintf("no output from the agent CLI for %s", cfg.IdleTimeout)) {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-resultCh:
			resultCh = nil
			graceC = time.After(cfg.ResultGrace)
			graceMark = r.readBytes.Load()
		case <-graceC:
			graceC = nil
			if n := r.readBytes.Load(); r.bg.inFlight() > 0 || n != graceMark {
				// Background tasks still run, or the CLI went on after
				// them (a turn of their notification): it is not hanging
				// (idle_timeout and timeout still apply).
				graceMark = n
				graceC = time.After(cfg.ResultGrace)
				continue
			}
			r.warn(fmt.Sprintf("the agent CLI was still running %s after its result line; stopped it", cfg.ResultGrace))
			if killC == nil {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-killC:
			killC = nil
			r.log.Warn("killing the agent CLI's process group", "pid", r.pid)
			_ = killGroup(r.pid)
		case <-exited:
			exited = nil
			r.closeStdin()
			ctxDone, idleC, graceC, killC, resultCh, timeoutC = nil, nil, nil, nil, nil, nil
			// Whatever the CLI left in its group (tools, MCP servers) goes too.
			_ = killGroup(r.pid)
			if readDone != nil {
				drainMark = r.readBytes.Load()
				drainC = time.After(drainPeriod)
			}
		case <-drainC:
			// The process is gone but the stream is still open: a
			// descendant outside the group holds it. Close it once the
			// reader is blocked on it with nothing new.
			if n := r.readBytes.Load(); n == drainMark && r.reading.Load() {
				r.warn("the agent CLI's output stayed open after it exited; closed it")
				r.closeRead()
				drainC = nil
			} else {
				drainMark = n
				drainC = time.After(drainPeriod)
			}
		case <-readDone:
			readDone = nil
			drainC = nil
		}
	}
}

func stopCause(ctx context.Context, timeout time.Duration) (Category, string) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if timeout > 0 {
			return CategoryTimeout, fmt.Sprintf("the run took longer than %s", timeout)
		}
		return CategoryTimeout, "the run's deadline passed"
	}
	return CategoryCancelled, "the run was cancelled"
}

// requestStop records why the run is being stopped; false when the process
// has ended already or a reason was recorded before.
func (r *Process) requestStop(cat Category, detail string) bool {
	select {
	case <-r.exited:
		return false
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != "" {
		return false
	}
	r.stop, r.stopDetail, r.stopResult = cat, detail, r.resultSeen
	r.log.Info("stopping the agent CLI", "pid", r.pid, "reason", cat)
	return true
}

// interrupt sends SIGINT to the group and returns when to kill it.
func (r *Process) interrupt(grace time.Duration) <-chan time.Time {
	if err := interruptGroup(r.pid); err != nil {
		r.log.Warn("interrupt the agent CLI", "pid", r.pid, "err", err)
	}
	return time.After(grace)
}
