package tty

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusLineGoesAwayForOtherOutput: on a terminal the status line is
// drawn dim, erased before other output and drawn again after; replaced,
// it is erased first; removed, it is not drawn again.
func TestStatusLineGoesAwayForOtherOutput(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	o := NewTerminal(&b, 0)
	o.ClearStatus()
	o.DrawStatus()
	if b.Len() != 0 {
		t.Fatalf("no status line, yet %q", b.String())
	}
	o.SetStatus("⋯ turn 1")
	o.ClearStatus()
	o.Write([]byte("a line\n"))
	o.DrawStatus()
	o.SetStatus("⋯ turn 2")
	o.SetStatus("")
	o.DrawStatus()
	want := "\x1b[2m⋯ turn 1\x1b[0m" + "\r\x1b[K" + "a line\n" + "\x1b[2m⋯ turn 1\x1b[0m" +
		"\r\x1b[K" + "\x1b[2m⋯ turn 2\x1b[0m" + "\r\x1b[K"
	if got := b.String(); got != want {
		t.Errorf("wrote %q\nwant  %q", got, want)
	}
	if o.Status() != "" || !o.TTY() || !o.Colour() {
		t.Errorf("status %q, tty %v, colour %v", o.Status(), o.TTY(), o.Colour())
	}
}

// TestStatusLineNeverWraps: the status line is cut to the terminal's
// width (a wrapped line could not be erased).
func TestStatusLineNeverWraps(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	o := NewTerminal(&b, 10)
	o.SetStatus("⋯ turn 12 · 3.4s · $0.0012")
	if got := o.Status(); got != "⋯ turn 1…" || len([]rune(got)) > 9 || o.Width() != 10 {
		t.Errorf("status %q on a terminal of width %d", got, o.Width())
	}
	o = NewTerminal(&b, 0)
	if o.SetStatus("⋯ turn 12 · 3.4s"); o.Status() != "⋯ turn 12 · 3.4s" {
		t.Errorf("status %q on a terminal of unknown width", o.Status())
	}
}

// TestNotATerminal: a file or a buffer is no terminal: no status line, no
// colour, no width.
func TestNotATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	for _, under := range []any{f, &b, nil, (*os.File)(nil)} {
		if IsTerminal(under) {
			t.Errorf("IsTerminal(%T) = true", under)
		}
		o := New(&b, under)
		o.SetStatus("⋯ turn 1")
		o.ClearStatus()
		o.DrawStatus()
		if o.TTY() || o.Colour() || o.Width() != 0 || o.Status() != "" || b.Len() != 0 {
			t.Errorf("%T: tty %v, colour %v, width %d, status %q, wrote %q", under, o.TTY(), o.Colour(), o.Width(), o.Status(), b.String())
		}
	}
	if got := Bold("x") + Dim("y"); !strings.Contains(got, "\x1b[1mx\x1b[0m") || !strings.Contains(got, "\x1b[2my\x1b[0m") {
		t.Errorf("Bold, Dim = %q", got)
	}
}
