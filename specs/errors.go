package specs

import (
	"strconv"
	"strings"
)

// Error is one problem found in a spec file, at a line and a key.
type Error struct {
	// File is the spec file's path as given to Parse or Load.
	File string
	// Line is the line in File, counted from 1; 0 when the problem
	// concerns the whole file.
	Line int
	// Key is the frontmatter key, with a path for nested values
	// ("surfaces[1].github.issue"); empty when no key is concerned.
	Key string
	Msg string
}

// Error formats e as "file:line: key: message", leaving out the parts
// that are not known.
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, in file and line order. Parse, Load,
// LoadDir and NewScheduler return it (as error) so that a caller can print
// every problem, not just the first.
type Errors []Error

// Error formats one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// err returns es as an error, or nil when es is empty (a nil Errors in a
// non-nil error interface would not compare equal to nil).
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}
