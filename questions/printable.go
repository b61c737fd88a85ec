package questions

import (
	"strings"
	"unicode/utf8"
)

// Printable makes untrusted text (the model's, or what people typed) safe
// to print on a terminal or post anywhere: invalid UTF-8 is replaced;
// terminal escape sequences are removed whole (CSI "ESC [ … final", OSC and
// the other strings "ESC ] … BEL or ESC \", two-byte "ESC x"), so no clear
// screen, window title, hidden text or hyperlink gets through; "\r\n"
// becomes "\n"; control characters (but '\n' and '\t'), zero-width, bidi and
// other invisible format characters are removed; secrets are redacted
// (Redact). Unlike Clean it keeps HTML comments: it is for showing text,
// not for handing it to the model. Every printer of model or human text
// uses it.
func Printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = StripEscapes(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, s)
	return Redact(s)
}

// StripEscapes removes terminal escape sequences whole, and a lone ESC at
// the end. Everything else is left as it is (Printable removes the rest).
func StripEscapes(s string) string {
	if !strings.ContainsRune(s, 0x1b) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != 0x1b {
			b.WriteByte(c)
			i++
			continue
		}
		i++ // ESC
		if i >= len(s) {
			break
		}
		switch s[i] {
		case '[': // CSI: parameters and intermediates, then a final byte @ to ~
			i++
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
			i++
		case ']', 'P', 'X', '^', '_': // strings, ended by BEL or ST (ESC \)
			i++
			for i < len(s) && s[i] != 0x07 && !(s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\') {
				i++
			}
			if i < len(s) && s[i] == 0x1b {
				i++
			}
			i++
		default: // two-byte sequence: skip the byte after ESC (a whole rune)
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
	}
	return b.String()
}
