package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// DefaultMaxLineBytes is the default cap on one stream-json line.
const DefaultMaxLineBytes = 64 << 20

// SkippedPrefixBytes bounds the first bytes of a skipped oversize line that
// a Reader keeps (Diagnostic.Prefix, Outcome.OversizePrefix).
const SkippedPrefixBytes = 256

// defaultMaxDiagnostics bounds the diagnostics a Reader keeps.
const defaultMaxDiagnostics = 100

// ReaderOptions configures a Reader.
type ReaderOptions struct {
	// MaxLineBytes caps one line, without its line ending (0: 64 MiB). A
	// longer line is skipped with a DiagOversize diagnostic; the lines
	// after it are read as usual.
	MaxLineBytes int
	// Strict makes the result checks errors (see Parser.Strict).
	Strict bool
	// MaxDiagnostics bounds the diagnostics kept (0: 100); the counts in
	// ReaderStats are always complete.
	MaxDiagnostics int
}

// ReaderStats counts what a Reader has seen so far.
type ReaderStats struct {
	Bytes            int64 // bytes read
	Lines            int   // lines, blank ones included
	Events           int   // events returned
	BlankLines       int   // white-space-only lines, skipped silently
	MalformedLines   int   // lines skipped with a ParseError
	OversizeLines    int   // lines over the cap, skipped
	CheckDiagnostics int   // checks failed by kept events
}

// Reader reads a stream-json transcript line by line as a pull iterator:
//
//	r := executor.NewReader(f, executor.ReaderOptions{})
//	for r.Next() {
//		ev := r.Event()
//		…
//	}
//	if err := r.Err(); err != nil { … }
//
// A bad line never stops the reading: it is counted,
// kept as a Diagnostic and skipped. Err reports only read errors. Memory
// does not grow with the transcript: one line (up to the cap) is held at a
// time, plus a bounded list of diagnostics.
type Reader struct {
	src      io.Reader
	slab     []byte
	rd, wr   int   // unread bytes are slab[rd:wr]
	srcErr   error // from src, not yet returned
	eofSeen  bool
	max      int
	maxDiags int
	parser   Parser
	ev       Event
	err      error
	eof      bool
	stats    ReaderStats
	diags    []Diagnostic
	onDiag   func(Diagnostic)
	// The oversize line readLine skipped last: its first bytes and length.
	skipPrefix []byte
	skipLen    int64
	// firstSkip is the first oversize line's diagnostic.
	firstSkip *Diagnostic
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader, opts ReaderOptions) *Reader {
	rd := &Reader{
		src:      r,
		max:      opts.MaxLineBytes,
		maxDiags: opts.MaxDiagnostics,
	}
	rd.parser.Strict = opts.Strict
	if rd.max <= 0 {
		rd.max = DefaultMaxLineBytes
	}
	if rd.maxDiags <= 0 {
		rd.maxDiags = defaultMaxDiagnostics
	}
	return rd
}

// Next advances to the next event. It returns false at the end of the input
// or on a read error (see Err).
func (r *Reader) Next() bool {
	r.ev = nil
	for !r.eof {
		line, oversize, err := r.readLine()
		if err != nil {
			r.eof = true
			if !errors.Is(err, io.EOF) {
				r.err = fmt.Errorf("read stream-json: %w", err)
			}
			if line == nil && !oversize {
				return false
			}
		}
		r.stats.Lines++
		if oversize {
			r.stats.OversizeLines++
			d := Diagnostic{Line: r.stats.Lines, Kind: DiagOversize, Bytes: r.skipLen, Prefix: string(r.skipPrefix),
				Msg: fmt.Sprintf("line of %d bytes skipped (longer than %d)", r.skipLen, r.max)}
			if r.firstSkip == nil {
				r.firstSkip = &d
			}
			r.addDiag(d)
			continue
		}
		ev, perr := r.parser.parseOwned(line)
		if perr != nil {
			r.stats.MalformedLines++
			d := Diagnostic{Line: r.stats.Lines, Kind: DiagMalformed, Msg: perr.Error()}
			var pe *ParseError
			if errors.As(perr, &pe) {
				d.Code, d.Msg = pe.Code, pe.Msg
			}
			r.addDiag(d)
			continue
		}
		for _, d := range r.parser.Diagnostics() {
			r.stats.CheckDiagnostics++
			d.Line = r.stats.Lines
			r.addDiag(d)
		}
		if ev == nil {
			r.stats.BlankLines++
			continue
		}
		r.stats.Events++
		r.ev = ev
		return true
	}
	return false
}

// Event returns the event Next advanced to.
func (r *Reader) Event() Event { return r.ev }

// Err returns the first read error (never io.EOF, never a bad line).
func (r *Reader) Err() error { return r.err }

// Line returns the number of the line of the current event (1-based).
func (r *Reader) Line() int { return r.stats.Lines }

// Stats returns the counts so far.
func (r *Reader) Stats() ReaderStats { return r.stats }

// Diagnostics returns the kept diagnostics (the first MaxDiagnostics), in
// line order.
func (r *Reader) Diagnostics() []Diagnostic { return r.diags }

// FirstOversize returns the diagnostic of the first line skipped for being
// over the cap (with its length and first bytes), or nil.
func (r *Reader) FirstOversize() *Diagnostic { return r.firstSkip }

// noteSkip starts recording an oversize line whose first bytes are b: it
// keeps up to SkippedPrefixBytes of them, cut on a rune boundary, and counts
// them.
func (r *Reader) noteSkip(b []byte) {
	n := len(b)
	if n > SkippedPrefixBytes {
		n = SkippedPrefixBytes
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	r.skipPrefix = append(r.skipPrefix[:0], b[:n]...)
	r.skipLen = int64(len(b))
}

func (r *Reader) addDiag(d Diagnostic) {
	if r.onDiag != nil {
		r.onDiag(d)
	}
	if len(r.diags) < r.maxDiags {
		r.diags = append(r.diags, d)
	}
}

// slabSize is the size of the chunks the Reader reads into. Lines are
// handed to the parser in place: a chunk is never written again once a
// line in it has been returned, so events can keep pointing into it.
const slabSize = 64 << 10

// readLine returns the next line without its "\n". At the end of the input
// it returns the last unterminated line (if any) with io.EOF. A line over
// the cap is consumed and reported with oversize true and no bytes.
func (r *Reader) readLine() (line []byte, oversize bool, err error) {
	discarding := false
	scanned := 0 // bytes of slab[r.rd:r.wr] known to hold no "\n"
	for {
		if i := bytes.IndexByte(r.slab[r.rd+scanned:r.wr], '\n'); i >= 0 {
			end := r.rd + scanned + i
			line = r.slab[r.rd:end:end]
			r.rd = end + 1
			if discarding {
				r.skipLen += int64(len(line))
				return nil, true, nil
			}
			if len(line) > r.max {
				r.noteSkip(line)
				return nil, true, nil
			}
			return line, false, nil
		}
		scanned = r.wr - r.rd
		if !discarding && scanned > r.max {
			discarding = true
			r.noteSkip(r.slab[r.rd:r.wr])
		} else if discarding {
			r.skipLen += int64(scanned)
		}
		if discarding {
			r.rd, scanned = r.wr, 0
		}
		if r.srcErr != nil {
			err, r.srcErr = r.srcErr, nil
			r.eofSeen = true
			if discarding {
				return nil, true, err
			}
			if r.wr > r.rd {
				line = r.slab[r.rd:r.wr:r.wr]
				r.rd = r.wr
				if len(line) > r.max {
					r.noteSkip(line)
					return nil, true, err
				}
				return line, false, err
			}
			return nil, false, err
		}
		if r.eofSeen {
			return nil, false, io.EOF
		}
		if r.wr == len(r.slab) {
			// Full: continue in a new chunk, with the partial line.
			n := r.wr - r.rd
			next := make([]byte, max(slabSize, min(2*n, r.max+slabSize)))
			copy(next, r.slab[r.rd:r.wr])
			r.slab, r.rd, r.wr = next, 0, n
		}
		m, rerr := r.src.Read(r.slab[r.wr:])
		r.wr += m
		r.stats.Bytes += int64(m)
		if rerr != nil {
			r.srcErr = rerr
		}
	}
}
