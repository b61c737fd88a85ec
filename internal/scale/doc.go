// Package scale measures `orchestrator serve` from outside with many runs
// waiting on a question (issue 23): its tests and benchmarks build the
// program, seed runs waiting straight into a store (the seed command,
// through the store's API), start `serve` on it as a separate process and
// read what it costs from /proc, /metrics and `orchestrator status`, and
// how soon an answer starts the run's CLI again.
//
// Nothing here is used by the program; the package is its tests.
package scale

import (
	"fmt"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// RunID is the ID of the i-th seeded run ("r" and eight hex digits, as
// the runner makes them).
func RunID(i int) string { return fmt.Sprintf("r%08x", i) }

// SessionID is the session of the i-th seeded run: a version-4 UUID
// naming i, so that a CLI started with --resume tells which run it is.
func SessionID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

// Set is the question set the i-th seeded run waits on: asked by its
// first turn, one question with two options.
func Set(i int) questions.Set {
	return questions.NewSet(RunID(i), 1, []questions.Question{{
		Header: "Pick", Text: fmt.Sprintf("Which way for item %d?", i),
		Options: []questions.Option{{Label: "left"}, {Label: "right"}},
	}})
}

// Answer is the response that answers Set(i).
func Answer(i int) questions.Response {
	s := Set(i)
	return questions.Response{SetID: s.ID, By: "scale", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: s.Questions[0].ID, Labels: []string{"left"}}}}
}
