// Command orchestrator runs a coding agent CLI on a task, and when the model
// asks a question, asks people on the terminal, GitHub or Discord and
// resumes the session with their answer.
//
// main only wires the process to Main: the arguments, the standard streams,
// the environment, and SIGINT/SIGTERM as context cancellation.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // CRON_TZ= zones in schedules work on hosts without a zone database
)

// Set at build time, as `make build` and goreleaser (.goreleaser.yaml) do:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234… -X main.date=2026-11-26T10:00:00Z"
//
// date is the commit's time (RFC 3339). A commit ending in "-dirty" was
// built with local changes. When empty, the module version, VCS revision and
// VCS time go build recorded are used (none with -buildvcs=false).
var (
	version string
	commit  string
	date    string
)

func main() { os.Exit(run(NewMain())) }

func run(m *Main) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handling: a second
	// Ctrl-C ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	return m.Exec(ctx, os.Args[1:])
}
