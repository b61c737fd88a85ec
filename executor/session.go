package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrSessionFileNotFound is returned (wrapped) when no session file exists
// for a session id.
var ErrSessionFileNotFound = errors.New("session file not found")

// Where the claude CLI keeps sessions (measured with 2.1.330): the file
// <config dir>/projects/<working dir with '/' replaced by '-'>/<session id>.jsonl,
// where the config dir is $CLAUDE_CONFIG_DIR or else $HOME/.claude; one
// JSON record per line. The file does not exist yet when the init line is
// printed. The user's prompt is written when the CLI makes its API call:
// the file appears with the prompt 0-100 ms after the API has received the
// request, before any reply byte, and a SIGKILL after that leaves it there.
// So after a crash: prompt in the file means the turn reached the session
// (resume without re-sending it); not in the file means it did not.

// SessionFile returns the path of the session file of sessionID under the
// CLI config dir configDir (normally $HOME/.claude), searching every
// project directory.
func SessionFile(configDir, sessionID string) (string, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, `/\*?[`) || sessionID == "." || sessionID == ".." {
		return "", fmt.Errorf("session file: invalid session id %q", sessionID)
	}
	matches, err := filepath.Glob(filepath.Join(configDir, "projects", "*", sessionID+".jsonl"))
	if err != nil {
		return "", fmt.Errorf("session file: %w", err)
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("session %s under %s: %w", sessionID, configDir, ErrSessionFileNotFound)
	}
	// Several project dirs can hold the same id (resumed elsewhere): take
	// the most recently written.
	best, bestTime := matches[0], int64(-1)
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.ModTime().UnixNano() > bestTime {
			best, bestTime = m, fi.ModTime().UnixNano()
		}
	}
	return best, nil
}

// SessionTranscriptHas reports whether the CLI's own session file for
// sessionID, in the child's config dir ($CLAUDE_CONFIG_DIR or
// $HOME/.claude, from Config.Env or else the inherited environment),
// contains needle, as written or in its JSON string encoding (the file
// stores the prompt JSON-escaped). The run loop uses it after a crash to
// learn whether a resume prompt already reached the session. A missing file
// is an error wrapping ErrSessionFileNotFound. The file is streamed: memory
// does not grow with it.
func (e *Executor) SessionTranscriptHas(sessionID, needle string) (bool, error) {
	return sessionHas(e.ConfigDir(), sessionID, needle)
}

// ConfigDir is the CLI's config dir for the child's environment.
func (e *Executor) ConfigDir() string {
	env := e.Environ()
	if d, ok := envValue(env, "CLAUDE_CONFIG_DIR"); ok && d != "" {
		return d
	}
	home, _ := envValue(env, "HOME")
	return filepath.Join(home, ".claude")
}

func sessionHas(configDir, sessionID, needle string) (bool, error) {
	if needle == "" {
		return false, errors.New("session search: empty needle")
	}
	path, err := SessionFile(configDir, sessionID)
	if err != nil {
		return false, err
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("session %s: %w", sessionID, ErrSessionFileNotFound)
		}
		return false, fmt.Errorf("open session file: %w", err)
	}
	defer f.Close()
	needles := [][]byte{[]byte(needle)}
	if esc := jsEscape(needle); esc != needle {
		needles = append(needles, []byte(esc))
	}
	found, err := streamContains(f, needles)
	if err != nil {
		return false, fmt.Errorf("read session file: %w", err)
	}
	return found, nil
}

// streamContains searches r for any of needles with a bounded window.
func streamContains(r io.Reader, needles [][]byte) (bool, error) {
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	const chunk = 256 << 10
	buf := make([]byte, 0, chunk+longest)
	tmp := make([]byte, chunk)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for _, nd := range needles {
			if bytes.Contains(buf, nd) {
				return true, nil
			}
		}
		if keep := longest - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// jsEscape encodes s the way JSON.stringify does inside a string (without
// the quotes): '"', '\\' and control characters escaped, nothing else.
func jsEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}
