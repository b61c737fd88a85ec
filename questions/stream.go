package questions

import (
	"errors"
	"strings"
)

// StreamDetector finds QUESTION blocks in text that arrives in chunks of any
// size (partial-message deltas), split anywhere, even inside "<!--QUES". It
// finds exactly what Detect finds on the whole text, with the same offsets.
//
// It keeps the text it is given. A block is reported once the bytes after it
// decide it: a block at the very end of a line that holds an unclosed '`'
// before it, for example, is decided by the end of that line; Close decides
// everything. To stay linear in the text's length however it is chunked, an
// undecided stretch longer than 4 KiB is looked at again only once it has
// grown by a quarter (Close always looks).
//
// A StreamDetector is not safe for concurrent use.
type StreamDetector struct {
	b       strings.Builder
	s       scanner
	closed  bool
	scanned int // length of the text at the last scan
}

// NewStreamDetector returns a detector waiting for text.
func NewStreamDetector() *StreamDetector { return &StreamDetector{} }

const streamBackoff = 4 << 10

// Write adds a chunk of text. Writing after Close does nothing.
func (d *StreamDetector) Write(chunk string) {
	if d.closed || chunk == "" {
		return
	}
	d.b.WriteString(chunk)
	undecided := d.scanned - d.s.next
	if undecided > streamBackoff && d.b.Len()-d.scanned < undecided/4 {
		return
	}
	d.scan(false)
}

func (d *StreamDetector) scan(final bool) {
	text := d.b.String()
	d.s.scan(text, final)
	d.scanned = len(text)
}

// Close ends the text and decides what was still undecided.
func (d *StreamDetector) Close() {
	if d.closed {
		return
	}
	d.closed = true
	d.scan(true)
}

// Markers returns the blocks decided so far, in order. The slice must not be
// modified.
func (d *StreamDetector) Markers() []Marker { return d.s.markers }

// Text returns the text written so far.
func (d *StreamDetector) Text() string { return d.b.String() }

// TurnCollector collects the text of one model turn and yields its questions.
// The real CLI emits one assistant line per content block; feed each text
// block with AddAssistantText, in stream order, and the final result line's
// text with AddResultText. The result text repeats the assistant text, so it
// is used only when no assistant text was seen: a question is never asked
// twice.
//
// Each text block is a markdown document of its own (a fence left open in one
// block does not hide the next block's question). Byte offsets in errors are
// into the assistant text blocks concatenated.
type TurnCollector struct {
	blocks []string
	result string
	hasRes bool
}

// AddAssistantText adds the text of one assistant text block.
func (c *TurnCollector) AddAssistantText(s string) { c.blocks = append(c.blocks, s) }

// AddResultText records the result line's text.
func (c *TurnCollector) AddResultText(s string) { c.result, c.hasRes = s, true }

func (c *TurnCollector) sources() []string {
	if len(c.blocks) == 0 && c.hasRes {
		return []string{c.result}
	}
	return c.blocks
}

// Markers returns the turn's blocks, their offsets into the concatenated text.
func (c *TurnCollector) Markers() []Marker {
	var out []Marker
	base := 0
	for _, b := range c.sources() {
		for _, m := range Detect(b) {
			m.Start += base
			m.End += base
			if me, ok := m.Err.(*MarkerError); ok {
				e := *me
				e.Offset += base
				e.At += base
				m.Err = &e
			}
			out = append(out, m)
		}
		base += len(b)
	}
	return out
}

// Questions returns the questions of all the turn's blocks, in order (none
// when the turn asked nothing). The error joins a *MarkerError for every
// malformed or invalid block; when the turn's questions together break the
// limits of one set (more than MaxQuestions), it is a *MarkerError about the
// last block. On error the questions of the valid blocks are still returned,
// but the caller should send CorrectionPrompt(err) rather than ask them.
func (c *TurnCollector) Questions() ([]Question, error) {
	var qs []Question
	var errs []error
	var last *Marker
	ms := c.Markers()
	for i, m := range ms {
		if m.Err != nil {
			errs = append(errs, m.Err)
			continue
		}
		qs = append(qs, m.Questions...)
		last = &ms[i]
	}
	if len(errs) == 0 && len(qs) > 0 {
		if err := ValidateQuestions(qs); err != nil {
			var fe *FieldError
			errors.As(err, &fe)
			errs = append(errs, &MarkerError{Offset: last.Start, At: last.Start, Field: fe.Field,
				Reason: fe.Reason + " (counting every QUESTION block of the message)"})
		}
	}
	return qs, errors.Join(errs...)
}

// Text returns the turn's text with the blocks removed: the stripped text
// blocks, trimmed, joined by blank lines.
func (c *TurnCollector) Text() string {
	var parts []string
	for _, b := range c.sources() {
		if t := strings.TrimSpace(Strip(b)); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Reset forgets everything, for the next turn.
func (c *TurnCollector) Reset() { *c = TurnCollector{} }
