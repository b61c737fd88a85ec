package questions

import (
	"strings"
	"testing"
)

func TestPrintableRemovesEscapesAndBidi(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ttext\nnext", "plain\ttext\nnext"},
		{"\x1b]0;pwned title\x07after", "after"},
		{"\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"a\x1b[2Jb\x1b[31mred\x1b[0m", "abred"},
		{"hidden\x1b[8mtext", "hiddentext"},
		{"x\u202egnp.exe", "xgnp.exe"},
		{"zero\u200bwidth\ufeff", "zerowidth"},
		{"crlf\r\nline\rover", "crlf\nlineover"},
		{"bell\x07 del\x7f c1\u009b", "bell del c1"},
		{"two-byte \x1bc reset", "two-byte  reset"},
		{"lone esc at end \x1b", "lone esc at end "},
		{"bad utf8 \xff", "bad utf8 \uFFFD"},
		{"token ghp_abcdefghijklmnopqrstuvwxyz0123", "token [REDACTED]"},
		{"no <!-- comments -->blocks", "no blocks"},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzPrintable(f *testing.F) {
	f.Add("\x1b]0;t\x07\x1b[2J\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		if strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, '\u202e') || strings.ContainsRune(got, '\r') {
			t.Fatalf("Printable(%q) = %q", s, got)
		}
		if Printable(got) != got {
			t.Fatalf("not idempotent: %q → %q → %q", s, got, Printable(got))
		}
	})
}
