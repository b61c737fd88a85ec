package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// The guard of a CLI (runner.Config.Guard). On a shared store a run's CLI
// must stop before another instance may take the run over. The instance
// driving it kills it when it cannot renew its lease, but an instance that
// is stopped (SIGSTOP, a stalled VM, swapped out) cannot: its CLI would go
// on beside the new one. So each CLI of a leased drive gets a guard, a
// process of its own that the driver's stall does not stop: it watches the
// run's lease in the database and kills the CLI's process group once the
// drive's take is not the run's any more, or was not renewed for half the
// lease's TTL — the moment the driver itself gives up, half a TTL before
// the lease may be taken over. It ends when the CLI's group is gone.

func (m *Main) newGuardCmd() *cobra.Command {
	var stateDir, runID string
	var fence int64
	var pid int
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:         "guard --state DIR --run RUN --fence N --pid PID --ttl D",
		Short:       "Stops a run's agent CLI once its instance lost the run (not for people)",
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(),
		Hidden:      true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return m.runGuard(cmd.Context(), stateDir, runID, fence, pid, ttl)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", "", "the orchestrator's state directory")
	cmd.Flags().StringVar(&runID, "run", "", "the run the CLI works for")
	cmd.Flags().Int64Var(&fence, "fence", 0, "the fencing token of the drive that started the CLI")
	cmd.Flags().IntVar(&pid, "pid", 0, "the CLI's process (and process group) id")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "the lease's TTL")
	for _, f := range []string{"state", "run", "fence", "pid", "ttl"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

func (m *Main) runGuard(ctx context.Context, stateDir, runID string, fence int64, pid int, ttl time.Duration) error {
	if pid <= 1 || fence <= 0 || ttl <= 0 {
		return fmt.Errorf("guard: --pid %d, --fence %d, --ttl %s: all must be positive", pid, fence, ttl)
	}
	st, err := openHookStore(ctx, stateDir, runID)
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(m.Stderr, nil)).With("run", runID, "pid", pid, "fence", fence)
	every := max(ttl/8, 50*time.Millisecond)
	checked := time.Now() // the last time the lease was seen ours and renewed
	for {
		if !groupAlive(pid) {
			return nil
		}
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, every*2)
		l, err := st.RunLeaseState(cctx, runID)
		cancel()
		switch {
		case err == nil && (l.Token != fence || l.Owner == ""):
			log.Error("guard: the run was taken over or given back; killing the agent CLI", "token", l.Token, "owner", l.Owner)
			return killGroupNow(pid)
		case err == nil && time.Duration(l.Left) < ttl/2:
			log.Error("guard: the run's lease was not renewed for half its TTL; killing the agent CLI", "left", time.Duration(l.Left))
			return killGroupNow(pid)
		case err == nil:
			checked = sent
		case time.Since(checked) >= ttl/2:
			log.Error("guard: cannot read the run's lease for half its TTL; killing the agent CLI", "err", err)
			return killGroupNow(pid)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// startGuard starts the guard process of a CLI (runner.Config.Guard): this
// program again, in a process group of its own, so that neither a stall of
// this process nor a signal to the CLI's group stops it.
func (m *Main) startGuard(ttl time.Duration) func(runID string, fence int64, pid int) func() {
	return func(runID string, fence int64, pid int) func() {
		exe, err := os.Executable()
		if err != nil {
			m.Logger.Error("start the agent CLI's guard: the orchestrator's own path", "run", runID, "err", err)
			return func() {}
		}
		state, err := filepath.Abs(m.Config.StateDir)
		if err != nil {
			m.Logger.Error("start the agent CLI's guard", "run", runID, "err", err)
			return func() {}
		}
		cmd := exec.Command(exe, "guard", "--state", state, "--run", runID, "--fence", strconv.FormatInt(fence, 10),
			"--pid", strconv.Itoa(pid), "--ttl", ttl.String())
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = guardProcAttr()
		if err := cmd.Start(); err != nil {
			m.Logger.Error("start the agent CLI's guard", "run", runID, "err", err)
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		return func() {
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// guardFor is the runner's Guard on st: CLIs of drives under a lease are
// guarded where process groups are known (unix); nil otherwise.
func (m *Main) guardFor(st *store.Store) func(runID string, fence int64, pid int) func() {
	if !st.Shared() || !guardSupported {
		return nil
	}
	return m.startGuard(st.LeaseTTL())
}
