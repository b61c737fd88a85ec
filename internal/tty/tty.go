// Package tty is what the program knows of a terminal it writes to:
// whether a stream is one, its width, its colours, and a live status line
// that other lines go above. cmd decides with it once per stream; the
// terminal surface gets the outcome as plain options (Pretty, Echo) and
// its colours from here.
package tty

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// IsTerminal reports whether v is a terminal (an *os.File that is one).
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && f != nil && term.IsTerminal(int(f.Fd()))
}

// Bold and Dim are s in bold and dim, for a terminal.
func Bold(s string) string { return "\x1b[1m" + s + "\x1b[0m" }
func Dim(s string) string  { return "\x1b[2m" + s + "\x1b[0m" }

// clearLine returns to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// Out is an output stream as a terminal sees it (a nil *Out is a stream
// that is not a terminal: no colour, no status line). On a terminal it keeps a
// live status line at the bottom; a caller writing other output clears
// it first (ClearStatus) and draws it again after (DrawStatus). It is not safe for concurrent use:
// its user serialises the calls (progress holds its lock), and the writes
// of others sharing the stream go through a writer that serialises them.
type Out struct {
	w      io.Writer
	tty    bool
	width  int    // columns; 0 when unknown or not a terminal
	status string // the status line drawn, "" when none
}

// New is an Out writing to w, a terminal when under is one (under is the
// stream w writes to in the end: w may be a lock around it).
func New(w io.Writer, under any) *Out {
	o := &Out{w: w, tty: IsTerminal(under)}
	if o.tty {
		if wd, _, err := term.GetSize(int(under.(*os.File).Fd())); err == nil && wd > 0 {
			o.width = wd
		}
	}
	return o
}

// NewTerminal is an Out writing to w as to a terminal of width columns
// (0: unknown), for a caller that knows w ends at one when New cannot see
// it (a test's fake terminal).
func NewTerminal(w io.Writer, width int) *Out { return &Out{w: w, tty: true, width: max(width, 0)} }

// Write writes p to the stream as is.
func (o *Out) Write(p []byte) (int, error) { return o.w.Write(p) }

// TTY reports whether the stream is a terminal.
func (o *Out) TTY() bool { return o != nil && o.tty }

// Colour reports whether to colour what is written (on a terminal).
func (o *Out) Colour() bool { return o.TTY() }

// Width is the terminal's width in columns, 0 when unknown.
func (o *Out) Width() int {
	if o == nil {
		return 0
	}
	return o.width
}

// ClearStatus erases the status line, to write other output.
func (o *Out) ClearStatus() {
	if o.TTY() && o.status != "" {
		fmt.Fprint(o.w, clearLine)
	}
}

// DrawStatus draws the status line again after ClearStatus.
func (o *Out) DrawStatus() {
	if o.TTY() && o.status != "" {
		fmt.Fprint(o.w, Dim(o.status))
	}
}

// Status is the status line shown, "" when none.
func (o *Out) Status() string {
	if o == nil {
		return ""
	}
	return o.status
}

// SetStatus replaces the status line with s ("" removes it), dim and cut
// to the terminal's width so that it never wraps (a wrapped line cannot
// be erased). Off a terminal there is none.
func (o *Out) SetStatus(s string) {
	if !o.TTY() {
		return
	}
	o.ClearStatus()
	if r := []rune(s); o.width > 1 && len(r) > o.width-1 {
		s = string(r[:o.width-2]) + "…"
	}
	o.status = s
	o.DrawStatus()
}
