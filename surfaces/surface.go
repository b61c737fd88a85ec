// Package surfaces is where questions meet people: the Surface interface the
// run loop asks through, and the fan-out that asks on several surfaces at once.
//
// Each surface lives in its own subpackage (terminal, github, discord), is
// built from plain arguments, and asserts at compile time that it satisfies
// Surface. This package imports none of them.
package surfaces

import (
	"context"
	"errors"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Surface is a place where people can answer questions.
//
// Implementations are safe for concurrent use: the run loop may ask several
// sets at once, each from its own goroutine.
type Surface interface {
	// Name identifies the surface in logs, the store and answers
	// ("terminal", "github", "discord").
	Name() string

	// Ask shows set to people and blocks until someone allowed to answer has
	// given a valid answer to every question of set, or ctx ends, in which
	// case it returns ctx.Err() and the question stays asked.
	//
	// Ask is idempotent on set.ID: asking the same set again (a retry, or a
	// new process after a restart) finds what was already posted instead of
	// posting it twice, and returns an answer given in the meantime.
	//
	// A surface that can no longer take an answer (the terminal's input
	// reached EOF) returns an error wrapping ErrUnavailable; the question
	// stays pending and may be answered elsewhere.
	Ask(ctx context.Context, set questions.Set) (questions.Response, error)
}

// ErrUnavailable reports that a surface cannot take an answer any more.
var ErrUnavailable = errors.New("surface cannot take an answer")

// Resolver is implemented by surfaces that can show that a set was answered,
// here or elsewhere: edit the comment, disable the buttons, print a line.
// The run loop calls Resolve on every surface a set was asked on, the one
// that took the answer included, once the answer is stored.
type Resolver interface {
	Resolve(ctx context.Context, set questions.Set, resp questions.Response) error
}

// Reminder is implemented by surfaces that can remind people of a question
// still waiting for an answer.
type Reminder interface {
	Remind(ctx context.Context, set questions.Set) error
}

// ResumeNotifier is implemented by surfaces that show that the answer was
// handed to the model and the session resumed (GitHub's 🚀 reaction).
type ResumeNotifier interface {
	Resumed(ctx context.Context, set questions.Set) error
}

// ProgressReporter is implemented by surfaces that show how a run is going
// (GitHub's sticky status comment). The run loop calls Progress as the run
// advances, from one goroutine per run and never for two runs' progress in
// the same call; the surface decides how often it really writes. A Final
// progress is the last one of a drive.
type ProgressReporter interface {
	Progress(ctx context.Context, p RunProgress) error
}

// RunProgress is where a run stands.
type RunProgress struct {
	RunID string
	Title string
	// Step says what happens now: "turn 2 running", "waiting for an
	// answer", "done", "failed", …
	Step     string
	Turn     int
	ToolUses int
	LastTool string // the last tool used, with a short view of its input
	CostUSD  float64
	Elapsed  time.Duration
	// Final is set on the last progress of a drive; Summary then holds the
	// final text or the error (model output: surfaces clean it).
	Final   bool
	Summary string
}
