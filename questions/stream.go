package questions

import (
	"errors"
	"strings"
)

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
