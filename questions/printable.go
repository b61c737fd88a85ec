package questions

import (
	"strings"
	"unicode/utf8"
)

// Printable makes untrusted text (the model's, or what people typed) safe
// to print on a terminal or post anywhere: terminal escape sequences are
// removed whole (CSI "ESC [ … final", OSC and the other strings
// "ESC ] … BEL or ESC \", two-byte "ESC x"), so no clear screen, window
// title, hidden text or hyperlink gets through, and then the text is Clean:
// valid UTF-8, no control characters but '\n' and '\t', no zero-width,
// bidi or other invisible characters, no HTML comments (so no QUESTION
// block), secrets redacted. Every printer of model or human text uses it.
func Printable(s string) string {
	return Clean(StripEscapes(strings.ToValidUTF8(s, "\uFFFD")))
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
