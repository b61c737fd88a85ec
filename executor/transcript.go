package executor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func (r *Process) openTranscript() error {
	path := r.req.TranscriptPath
	if path == "" && r.e.cfg.TranscriptDir != "" {
		ext := ".ndjson"
		if r.claw {
			ext = ".json"
		}
		path = filepath.Join(r.e.cfg.TranscriptDir, time.Now().UTC().Format("20060102T150405.000000000Z")+ext)
	}
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("open transcript: %w", err)
	}
	// Appending: several runs may share one transcript file.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open transcript: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open transcript: %w", err)
	}
	r.transcript = &transcript{f: f, max: r.e.cfg.MaxLineBytes, off: fi.Size(), lineStart: fi.Size()}
	r.tpath = path
	return nil
}

func (r *Process) save(p []byte) {
	if r.transcript == nil {
		return
	}
	if err := r.transcript.write(p); err != nil {
		r.mu.Lock()
		if r.transcErr == nil {
			r.transcErr = err
		}
		r.mu.Unlock()
		r.transcript.f.Close()
		r.transcript = nil
	}
}

func (r *Process) closeTranscript() {
	if r.transcript != nil {
		if err := r.transcript.f.Close(); err != nil {
			r.mu.Lock()
			if r.transcErr == nil {
				r.transcErr = err
			}
			r.mu.Unlock()
		}
		r.transcript = nil
	}
}

// TranscriptPrefixBytes is how much of a line over the line cap a saved
// transcript keeps (at most the cap): the line is cut to its first bytes,
// and so reads back as a malformed line.
const TranscriptPrefixBytes = 64 << 10

// transcript saves the CLI's raw stdout as it streams. A line longer than
// max (the Reader's cap, which skips it) is cut back to its first
// TranscriptPrefixBytes: the file is truncated to the line's start plus
// that prefix and the rest of the line is not written, so a 100 MB line
// costs a bounded amount of disk, not the whole line.
type transcript struct {
	f         *os.File
	max       int
	off       int64 // the file's size
	lineStart int64 // where the current line starts in the file
	lineLen   int64 // bytes of the current line so far, without "\n"
	cut       bool  // the current line was cut
}

func (t *transcript) write(p []byte) error {
	for len(p) > 0 {
		seg, rest, nl := p, []byte(nil), false
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			seg, rest, nl = p[:i], p[i+1:], true
		}
		if !t.cut && t.lineLen+int64(len(seg)) > int64(t.max) {
			// The line is over the cap: keep its prefix only.
			prefix := min(int64(TranscriptPrefixBytes), int64(t.max))
			if keep := prefix - t.lineLen; keep > 0 {
				if err := t.put(seg[:min(int64(len(seg)), keep)]); err != nil {
					return err
				}
			}
			if end := t.lineStart + prefix; t.off > end {
				if err := t.f.Truncate(end); err != nil {
					return err
				}
				t.off = end
			}
			t.cut = true
		}
		if !t.cut {
			n := len(seg)
			if nl {
				n++ // the "\n" in the same write
			}
			if err := t.put(p[:n]); err != nil {
				return err
			}
		} else if nl {
			if err := t.put([]byte{'\n'}); err != nil {
				return err
			}
		}
		t.lineLen += int64(len(seg))
		if nl {
			t.lineStart, t.lineLen, t.cut = t.off, 0, false
		}
		p = rest
	}
	return nil
}

func (t *transcript) put(b []byte) error {
	n, err := t.f.Write(b)
	t.off += int64(n)
	return err
}
