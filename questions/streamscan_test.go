package questions

import "strings"

// The scanner Detect runs can also stop, undecided, where bytes not seen
// yet could change a decision, and resume there (final unset). Nothing but
// these tests feeds it text in chunks; they check that chunked scanning
// finds exactly what Detect finds, which is what keeps the scanner's
// decisions local to the bytes before them.

// streamDetector (test only) finds QUESTION blocks in text that arrives in chunks of any
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
// A streamDetector is not safe for concurrent use.
type streamDetector struct {
	b       strings.Builder
	s       scanner
	closed  bool
	scanned int // length of the text at the last scan
}

// newStreamDetector returns a detector waiting for text.
func newStreamDetector() *streamDetector { return &streamDetector{} }

const streamBackoff = 4 << 10

// Write adds a chunk of text. Writing after Close does nothing.
func (d *streamDetector) Write(chunk string) {
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

func (d *streamDetector) scan(final bool) {
	text := d.b.String()
	d.s.scan(text, final)
	d.scanned = len(text)
}

// Close ends the text and decides what was still undecided.
func (d *streamDetector) Close() {
	if d.closed {
		return
	}
	d.closed = true
	d.scan(true)
}

// Markers returns the blocks decided so far, in order. The slice must not be
// modified.
func (d *streamDetector) Markers() []Marker { return d.s.markers }

// Text returns the text written so far.
func (d *streamDetector) Text() string { return d.b.String() }
