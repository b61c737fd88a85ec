package main

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestHookStopsWhenItsOrchestratorIsGone: the hook's context ends, saying
// why, once the orchestrator that started its CLI is gone (killed while the
// hook held a call): no decision is handed to a CLI that dies with it.
func TestHookStopsWhenItsOrchestratorIsGone(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("processAlive cannot tell on Windows")
	}
	t.Parallel()
	sleeper := exec.Command("sleep", "600") // stands for the orchestrator
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := whileAlive(context.Background(), sleeper.Process.Pid)
	defer stop()
	select {
	case <-ctx.Done():
		t.Fatalf("the hook stopped while its orchestrator lives: %v", context.Cause(ctx))
	case <-time.After(3 * driverCheck):
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errDriverGone) {
			t.Fatalf("stopped for %v, want %v", context.Cause(ctx), errDriverGone)
		}
	case <-time.After(time.Minute):
		t.Fatal("the hook did not notice its orchestrator was gone")
	}
	// Started after it died: stopped at once.
	ctx, stop = whileAlive(context.Background(), sleeper.Process.Pid)
	defer stop()
	if !errors.Is(context.Cause(ctx), errDriverGone) {
		t.Fatalf("a hook whose orchestrator is gone: %v", context.Cause(ctx))
	}
}
