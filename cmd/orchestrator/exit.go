package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/config"
)

// Exit codes. They are decided here and nowhere else: commands return
// errors, and exitCode maps them.
const (
	exitOK        = 0   // done
	exitFailed    = 1   // the run failed, or any other error
	exitUsage     = 2   // bad command line or configuration
	exitWaiting   = 3   // the run stopped, waiting on a question
	exitStopped   = 4   // a person chose Stop at the run's budget or turn limit, or at a delivery held back by secrets
	exitCancelled = 130 // SIGINT/SIGTERM (128 + SIGINT)
)

// exitCodes are the exit codes as --help lists them: every one above.
var exitCodes = []struct {
	code int
	what string
}{
	{exitOK, "done"},
	{exitFailed, "the run failed, or another error"},
	{exitUsage, "a usage or configuration error (nothing was run)"},
	{exitWaiting, "the run is waiting on a question (resume it once answered)"},
	{exitStopped, "stopped by a person at the run's budget or turn limit, or at a delivery held back"},
	{exitCancelled, "cancelled (SIGINT or SIGTERM)"},
}

// exitCodesHelp lists exitCodes, one a line.
func exitCodesHelp() string {
	var b strings.Builder
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "  %3d  %s\n", c.code, c.what)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// exitError carries the exit code an error ends the process with. A nil err
// is a silent exit: the command has already said what there was to say.
type exitError struct {
	code  int
	err   error
	usage bool // a mistake on the command line: print a hint to --help
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake on the command line (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err, usage: true} }

// configError marks err as a problem with the configuration (exit 2).
func configError(err error) error { return &exitError{code: exitUsage, err: err} }

// waitingError ends the process with exit 3: the run is waiting on a
// question. err says which; nil when the command printed it already.
func waitingError(err error) error { return &exitError{code: exitWaiting, err: err} }

// silentExit ends the process with code, printing nothing more.
func silentExit(code int) error { return &exitError{code: code} }

// exitCode maps the error a command returned to the process's exit code.
// A cancelled ctx (a signal arrived) wins over whatever the command made of
// it, since a killed child usually fails with an unrelated error.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return exitCancelled
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return exitUsage
	}
	return exitFailed
}
