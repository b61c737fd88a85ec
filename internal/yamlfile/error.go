// Package yamlfile decodes the YAML of the orchestrator's files (the
// configuration, a spec's frontmatter) into Go values and reports every
// problem at once, each as an *Error naming the file, the line and the
// dotted key.
//
// A Decoder walks yaml.v3 nodes rather than calling yaml.Unmarshal on the
// whole document, so that unknown and duplicate keys, wrong types and bad
// values are found all together with their lines; yaml.v3's own decoding
// is used for each leaf value.
package yamlfile

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Error is one problem in a file, located as precisely as known.
type Error struct {
	File string // "" when the problem is not in a file
	Line int    // counted from 1; 0 when unknown or the whole file
	// Key is the dotted key with list indexes, such as
	// "surfaces.github.repo" or "surfaces[1].github.issue"; "" for the
	// whole file.
	Key string
	Err error
}

// Error formats e as "file:line: key: message", leaving out the parts that
// are not known.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found, so that a caller can print all of them.
type Errors []*Error

// Error formats one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems one by one, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Err returns es as an error, or nil when es is empty (a nil Errors in a
// non-nil error interface would not compare equal to nil).
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): `)

// SyntaxError turns an error of yaml.v3's parser into an *Error at the
// line it names (plus offset, the line of the document's first line less
// one); yaml.v3 reports some errors (an unclosed [ or {) a line early.
func SyntaxError(file string, offset int, err error) *Error {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line + offset, Err: errors.New("invalid YAML: " + msg[len(m[0]):])}
	}
	return &Error{File: file, Err: fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))}
}
