package questions

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

const (
	markerPrefix = "<!--QUESTION:"
	markerSuffix = "-->"
)

// Marker is one QUESTION block found in a text.
//
// What counts as a block (an "attempt"), outside code, is: "<!--", optional
// whitespace, "QUESTION", optional whitespace, ":", optional whitespace, "{",
// optional whitespace, and then '"' or '}' — the start of a JSON object.
// Everything else is prose and is left alone: "<!--QUESTION-->",
// "<!--QUESTION: see below-->", "<!--QUESTION:{…}-->" (an ellipsis is not a
// JSON key), and any block inside a fenced code block or an inline code span.
//
// The end of a block is found by reading the JSON object (braces inside JSON
// strings, and "-->" inside them, do not count), then optional whitespace and
// "-->". An attempt that is not a well-formed, valid block is still a Marker,
// with Err set, so the caller can ask the model to emit it again; its End is
// then, in order: just past the "-->" that follows the object; else just past
// the first "-->" after the object (or, if the object never closes, after the
// "{"); else the end of the object, or of the text.
type Marker struct {
	Start, End int // byte offsets of the whole block in the text
	// Questions are the block's questions, valid; nil when Err is set.
	Questions []Question
	// Err is a *MarkerError when the block is malformed or invalid.
	Err error
}

// MarkerError says what is wrong with a QUESTION block and where.
type MarkerError struct {
	Offset int    // byte offset of the block's "<!--" in the text
	At     int    // byte offset of the fault when known (JSON syntax), else Offset
	Field  string // path of the faulty field ("questions[0].options[1].label"), if any
	Reason string
}

func (e *MarkerError) Error() string {
	s := fmt.Sprintf("QUESTION block at byte %d: ", e.Offset)
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Reason
}

// Detect finds the QUESTION blocks of a text (one assistant text block, or a
// whole turn's text), in order. See Marker for what counts as a block.
//
// Code is recognised as follows. A fenced code block starts at a line whose
// first characters other than spaces, tabs and '>' are a run of at least three
// '`' or '~' (for '`', the rest of the line holds no '`'), and ends at a line
// of spaces, tabs and '>', then a run of the same character at least as long,
// then spaces; or at the end of the text. Elsewhere, an inline code span is a run
// of backticks closed by a run of exactly the same length on the same line;
// an unclosed run is plain text. As in CommonMark, what starts first wins: a
// QUESTION block, once recognised, is skipped whole (backticks inside it open
// no code span), but an unclosed-looking '`' earlier on the block's line is
// closed by a '`' inside the block's JSON, and the block is then code. (The
// protocol asks for the block on its own lines.) Indented code blocks and
// HTML blocks are not recognised.
func Detect(text string) []Marker {
	var s scanner
	s.scan(text)
	return s.markers
}

// Strip returns text with its QUESTION blocks (also malformed ones) removed,
// for showing to people; trailing whitespace left behind at the end of the
// text is trimmed.
func Strip(text string) string { return stripMarkers(text, Detect(text)) }

func stripMarkers(text string, ms []Marker) string {
	if len(ms) == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	prev := 0
	for _, m := range ms {
		b.WriteString(text[prev:m.Start])
		prev = m.End
	}
	b.WriteString(text[prev:])
	return strings.TrimRight(b.String(), " \t\r\n")
}

// scanner is the detector's state while Detect runs over one text.
type scanner struct {
	next int // where the search for the next "<!--" resumes

	// The code tracker: text before tpos is classified.
	tpos      int
	lineStart bool // tpos is at the start of a line
	fenceCh   byte // '`' or '~' while inside a fenced code block, else 0
	fenceLen  int
	// noCloser[n] = p: on the current line no backtick run of length n starts
	// at or after p (so unclosed runs are not searched again and again).
	noCloser map[int]int
	noLine   int // the line noCloser is about: position of its end

	markers []Marker
}

func (s *scanner) init() {
	if s.noCloser == nil {
		s.lineStart = true
		s.noCloser = map[int]int{}
		s.noLine = -1
	}
}

// scan finds the markers of text.
func (s *scanner) scan(text string) {
	s.init()
	for {
		i := strings.Index(text[s.next:], "<!--")
		if i < 0 {
			s.next = len(text)
			return
		}
		c := s.next + i
		jsonStart, ok := matchPrefix(text, c)
		if !ok {
			s.next = c + 1
			continue
		}
		if s.advance(text, c) {
			s.next = max(c+1, s.tpos)
			continue
		}
		m := parseBlock(text, c, jsonStart)
		s.markers = append(s.markers, m)
		s.next, s.tpos, s.lineStart = m.End, m.End, false
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(text string, i int) int {
	for i < len(text) && isSpace(text[i]) {
		i++
	}
	return i
}

// matchPrefix checks whether the "<!--" at c starts a QUESTION block (see
// Marker) and returns the offset of its "{".
func matchPrefix(text string, c int) (int, bool) {
	i := skipSpace(text, c+4)
	const kw = "QUESTION"
	if !strings.HasPrefix(text[i:], kw) {
		return 0, false
	}
	i = skipSpace(text, i+len(kw))
	if i == len(text) || text[i] != ':' {
		return 0, false
	}
	i = skipSpace(text, i+1)
	if i == len(text) || text[i] != '{' {
		return 0, false
	}
	brace := i
	i = skipSpace(text, i+1)
	if i == len(text) || (text[i] != '"' && text[i] != '}') {
		return 0, false
	}
	return brace, true
}

// parseBlock reads the block whose "<!--" is at c and whose JSON object
// starts at js.
func parseBlock(text string, c, js int) (m Marker) {
	m.Start = c
	fail := func(end, at int, field, reason string) Marker {
		m.End = end
		m.Err = &MarkerError{Offset: c, At: at, Field: field, Reason: reason}
		return m
	}
	je, closed := jsonEnd(text, js)
	if !closed {
		end := len(text)
		if k := strings.Index(text[js:], markerSuffix); k >= 0 {
			end = js + k + len(markerSuffix)
		}
		return fail(end, len(text), "", "the JSON object is never closed (a missing '}' or '\"'?)")
	}
	p := skipSpace(text, je)
	rest := text[p:]
	if !strings.HasPrefix(rest, markerSuffix) {
		k := strings.Index(rest, markerSuffix)
		end := je
		if k >= 0 {
			end = p + k + len(markerSuffix)
		}
		return fail(end, p, "", "expected --> right after the JSON object")
	}
	m.End = p + len(markerSuffix)
	raw := text[js:je]
	if len(raw) > maxBlockBytes {
		return fail(m.End, c, "questions", fmt.Sprintf("the block is %d bytes; a set holds at most %d bytes of text: shorten the questions, options and descriptions", len(raw), MaxSetBytes))
	}
	if !json.Valid([]byte(raw)) {
		var v any
		err := json.Unmarshal([]byte(raw), &v)
		at := js
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset > 0 {
			at = js + int(se.Offset) - 1 // Offset counts the bytes read, the bad one included
		}
		return fail(m.End, at, "", fmt.Sprintf("invalid JSON at byte %d: %v", at, err))
	}
	qs, err := decodeQuestions([]byte(raw))
	if err == nil {
		err = ValidateQuestions(qs)
	}
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return fail(m.End, c, fe.Field, fe.Reason)
		}
		return fail(m.End, c, "", err.Error())
	}
	m.Questions = qs
	return m
}

// jsonEnd finds the end of the JSON object starting at text[js] == '{' by
// matching braces and brackets outside strings. closed is false when the
// text ends first. It does not check the syntax otherwise.
func jsonEnd(text string, js int) (end int, closed bool) {
	depth := 0
	for i := js; i < len(text); i++ {
		switch text[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			for i++; i < len(text); i++ {
				if text[i] == '\\' {
					i++
				} else if text[i] == '"' {
					break
				}
			}
		}
	}
	return 0, false
}

// advance moves the code tracker up to limit (the offset of a candidate
// "<!--") and reports whether limit is inside code. The tracker may move past
// limit, but only over code, so candidates before s.tpos are code as well.
func (s *scanner) advance(text string, limit int) bool {
	for {
		if s.tpos > limit {
			return true
		}
		if s.fenceCh != 0 {
			if s.lineStart {
				if end, ok := s.closingFence(text); ok {
					s.fenceCh, s.tpos, s.lineStart = 0, end, true
					continue
				}
				s.lineStart = false
			}
			nl := strings.IndexByte(text[s.tpos:], '\n')
			if nl < 0 {
				s.tpos = len(text)
				return true // limit is on this line, inside the block
			}
			s.tpos += nl + 1
			s.lineStart = true
			continue
		}
		if s.lineStart {
			if s.tpos == limit { // a line starting with "<!--" opens no fence
				s.lineStart = false
				return false
			}
			if end, ok := s.openingFence(text); ok {
				s.tpos, s.lineStart = end, true
				continue
			}
			s.lineStart = false
		}
		seg := text[s.tpos:limit]
		nl := strings.IndexByte(seg, '\n')
		if nl >= 0 {
			seg = seg[:nl]
		}
		if bt := strings.IndexByte(seg, '`'); bt >= 0 {
			j := s.tpos + bt
			k := j
			for k < len(text) && text[k] == '`' {
				k++
			}
			if end, ok := s.closeSpan(text, k, k-j); ok {
				s.tpos = end
			} else {
				s.tpos = k
			}
			continue
		}
		if nl >= 0 {
			s.tpos += nl + 1
			s.lineStart = true
			continue
		}
		s.tpos = limit
		return false
	}
}

// linePrefix returns the end of the spaces, tabs and '>' at i.
func linePrefix(text string, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '>') {
		i++
	}
	return i
}

// openingFence checks the line at s.tpos; on ok it records the fence and
// returns the start of the next line (or the end of the text).
func (s *scanner) openingFence(text string) (int, bool) {
	i := linePrefix(text, s.tpos)
	if i == len(text) {
		return 0, false
	}
	ch := text[i]
	if ch != '`' && ch != '~' {
		return 0, false
	}
	j := i
	for j < len(text) && text[j] == ch {
		j++
	}
	if j-i < 3 {
		return 0, false
	}
	nl := strings.IndexByte(text[j:], '\n')
	lineEnd := len(text)
	if nl >= 0 {
		lineEnd = j + nl
	}
	if ch == '`' && strings.IndexByte(text[j:lineEnd], '`') >= 0 {
		return 0, false
	}
	s.fenceCh, s.fenceLen = ch, j-i
	if nl < 0 {
		return len(text), true
	}
	return lineEnd + 1, true
}

// closingFence checks whether the line at s.tpos closes the open fence and
// returns the start of the next line.
func (s *scanner) closingFence(text string) (int, bool) {
	i := linePrefix(text, s.tpos)
	if i == len(text) || text[i] != s.fenceCh {
		return 0, false
	}
	j := i
	for j < len(text) && text[j] == s.fenceCh {
		j++
	}
	if j-i < s.fenceLen {
		return 0, false
	}
	for j < len(text) && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r') {
		j++
	}
	if j == len(text) {
		return j, true
	}
	if text[j] != '\n' {
		return 0, false
	}
	return j + 1, true
}

// closeSpan looks, from k on the same line, for a backtick run of exactly n
// closing an inline code span opened by a run of n ending at k. On ok it
// returns the end of the closing run.
func (s *scanner) closeSpan(text string, k, n int) (int, bool) {
	lineEnd := len(text)
	if nl := strings.IndexByte(text[k:], '\n'); nl >= 0 {
		lineEnd = k + nl
	}
	if s.noLine != lineEnd {
		clear(s.noCloser)
		s.noLine = lineEnd
	}
	if q, ok := s.noCloser[n]; ok && q <= k {
		return 0, false
	}
	for p := k; p < lineEnd; {
		b := strings.IndexByte(text[p:lineEnd], '`')
		if b < 0 {
			break
		}
		q := p + b
		r := q
		for r < len(text) && text[r] == '`' {
			r++
		}
		if r-q == n {
			return r, true
		}
		p = r
	}
	if q, ok := s.noCloser[n]; !ok || k < q {
		s.noCloser[n] = k
	}
	return 0, false
}
