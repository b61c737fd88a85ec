package questions

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Excerpt is s when it has at most limit characters; otherwise its start
// and its end, about limit characters in all, with what was cut said
// plainly between them ("… 3,912 characters cut …"): a surface that cannot
// show a whole call shows both ends of it, never one alone. Cuts fall at a
// line's end when one is near, so the first and last lines show whole.
// cut is the number of characters left out (0: s is whole).
func Excerpt(s string, limit int) (excerpt string, cut int) {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, 0
	}
	if limit < 2 {
		limit = 2
	}
	r := []rune(s)
	headN, tailN := limit/2, limit-limit/2
	head := string(r[:headN])
	if i := strings.LastIndexByte(head, '\n'); i >= len(head)/2 {
		head = head[:i+1]
	}
	tail := string(r[n-tailN:])
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	}
	cut = n - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	sep := "\n"
	if strings.HasSuffix(head, "\n") {
		sep = ""
	}
	return head + sep + CutNote(cut) + "\n" + tail, cut
}

// CutNote says how much of a text was left out: "… 3,912 characters cut …".
func CutNote(cut int) string {
	unit := "characters"
	if cut == 1 {
		unit = "character"
	}
	return fmt.Sprintf("… %s %s cut …", thousands(cut), unit)
}

// WholeCallHint tells where the whole of a cut call can be read.
func WholeCallHint(runID string) string {
	return fmt.Sprintf("The whole call: `orchestrator show %s`, or the web inbox.", runID)
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
