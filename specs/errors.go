package specs

import (
	"errors"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// Error is one problem found in a spec file, at a line and a key: the
// same type as a configuration's problems. Key is the frontmatter key,
// with a path for nested values ("surfaces[1].github.issue").
type Error = yamlfile.Error

// Errors is every problem found, in file and line order. Parse, Load,
// LoadDir and NewScheduler return it (as error) so that a caller can print
// every problem, not just the first.
type Errors = yamlfile.Errors

// problem returns an *Error with a message.
func problem(file string, line int, key, msg string) *Error {
	return &Error{File: file, Line: line, Key: key, Err: errors.New(msg)}
}
