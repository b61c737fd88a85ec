package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"
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
// So after a crash: prompt in the file, as a "user" entry, means the turn
// reached the session (resume without re-sending it); not in the file, or
// only in the "queue-operation" entry written before it, means it did not
// (SessionTranscriptHas).

// SessionFile returns the path of the session file of sessionID under the
// CLI config dir configDir (normally $HOME/.claude), searching every
// project directory.
func SessionFile(configDir, sessionID string) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
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

// checkSessionID refuses an id that would make a session file's path point
// elsewhere, or a glob pattern match others.
func checkSessionID(sessionID string) error {
	if sessionID == "" || strings.ContainsAny(sessionID, `/\*?[`) || sessionID == "." || sessionID == ".." {
		return fmt.Errorf("session file: invalid session id %q", sessionID)
	}
	return nil
}

// SessionTranscriptHas reports whether the CLI's own session file for
// sessionID, in the child's config dir ($CLAUDE_CONFIG_DIR or
// $HOME/.claude, from Config.Env or else the inherited environment), holds
// a prompt of the user containing needle: a main-conversation "user" entry
// whose message text has it. The run loop uses it after a crash to learn
// whether a resume prompt already reached the session. A missing file is
// an error wrapping ErrSessionFileNotFound. The file is read a line at a
// time: memory grows with its longest line, not with it.
//
// Only such an entry is the prompt in the conversation (measured with
// 2.1.330): the CLI first logs the prompt it takes in a "queue-operation"
// entry ("enqueue", its text in "content"), and writes the "user" entry
// later (tens of milliseconds, seconds on a loaded machine), when it makes
// the API call. A `--resume` of a session killed in between sends the
// conversation without the prompt: the queued text is not part of it. A
// "user" entry with no reply after it (killed while the API call was under
// way) is sent: the resumed request has it, followed by an assistant
// message "No response requested." the CLI makes up, then the new prompt.
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
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && containsAny(line, needles) && promptHas(line, needle) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read session file: %w", err)
		}
	}
}

// SessionHasPrompt is SessionTranscriptHas of a session file's content:
// whether it holds a prompt of the user containing needle, as its "user"
// entry (not only queued). An empty needle is never found.
func SessionHasPrompt(session []byte, needle string) bool {
	if needle == "" {
		return false
	}
	needles := [][]byte{[]byte(needle)}
	if esc := jsEscape(needle); esc != needle {
		needles = append(needles, []byte(esc))
	}
	for len(session) > 0 {
		line := session
		if i := bytes.IndexByte(session, '\n'); i >= 0 {
			line, session = session[:i+1], session[i+1:]
		} else {
			session = nil
		}
		if containsAny(line, needles) && promptHas(line, needle) {
			return true
		}
	}
	return false
}

// containsAny reports whether b contains one of needles.
func containsAny(b []byte, needles [][]byte) bool {
	for _, n := range needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// promptHas reports whether line, an entry of a session file, is a prompt
// of the user in the main conversation (not a sub-agent's, not one the CLI
// adds) whose text contains needle. A line that is not JSON (one cut short
// by a crash) is not.
func promptHas(line []byte, needle string) bool {
	var e struct {
		Type        string `json:"type"`
		IsSidechain bool   `json:"isSidechain"`
		IsMeta      bool   `json:"isMeta"`
		Message     struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &e) != nil || e.Type != "user" || e.Message.Role != "user" || e.IsSidechain || e.IsMeta {
		return false
	}
	var text string
	if json.Unmarshal(e.Message.Content, &text) == nil {
		return strings.Contains(text, needle)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(e.Message.Content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "text" && strings.Contains(b.Text, needle) {
			return true
		}
	}
	return false
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

// The folder the CLI files a working directory's sessions under (measured
// with 2.1.330): the directory's real path (symbolic links resolved) with
// every UTF-16 code unit that is not an ASCII letter or digit replaced by
// '-'; a name longer than 200 is cut at 200 and followed by '-' and a hash
// of the whole path in base 36. `--resume` looks for the session there, in
// the folder of the directory it runs in: a session file put anywhere else
// is not found (CategorySessionNotFound).
const maxProjectDirName = 200

// projectDirName is the name of dir's folder under <config dir>/projects.
func projectDirName(dir string) string {
	units := utf16.Encode([]rune(dir))
	name := make([]byte, len(units))
	for i, u := range units {
		if u < 0x80 && ('a' <= u && u <= 'z' || 'A' <= u && u <= 'Z' || '0' <= u && u <= '9') {
			name[i] = byte(u)
		} else {
			name[i] = '-'
		}
	}
	if len(name) <= maxProjectDirName {
		return string(name)
	}
	// The CLI's hash: h = h*31 + unit over the UTF-16 code units, in
	// 32-bit integers, then its absolute value in base 36.
	var h int32
	for _, u := range units {
		h = h*31 + int32(u)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(name[:maxProjectDirName]) + "-" + strconv.FormatInt(abs, 36)
}

// SessionPath returns where the CLI keeps session sessionID of turns run in
// workDir (empty: this process's working directory, which the child
// inherits), in the child's config dir: the file a `--resume` there reads.
// The file need not exist.
func (e *Executor) SessionPath(workDir, sessionID string) (string, error) {
	if err := checkSessionID(sessionID); err != nil {
		return "", err
	}
	dir, err := filepath.Abs(workDir) // "" is the current directory
	if err != nil {
		return "", fmt.Errorf("session file of %s: working directory: %w", sessionID, err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the CLI resolves links too; a directory that is gone keeps its name
	}
	return filepath.Join(e.ConfigDir(), "projects", projectDirName(dir), sessionID+".jsonl"), nil
}

// ReadSession returns the content of the CLI's session file of sessionID
// for turns run in workDir (see SessionPath). A missing file is an error
// wrapping ErrSessionFileNotFound.
func (e *Executor) ReadSession(workDir, sessionID string) ([]byte, error) {
	path, err := e.SessionPath(workDir, sessionID)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session %s at %s: %w", sessionID, path, ErrSessionFileNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", sessionID, err)
	}
	return b, nil
}

// WriteSession makes content the CLI's session file of sessionID for turns
// run in workDir (see SessionPath), so that a `--resume` there finds it. The
// file is written whole or not at all (a temporary file renamed over it):
// a CLI or a crash never sees half of it. It is private to the user (0600,
// its folders 0700), as the CLI keeps it: it holds the conversation.
func (e *Executor) WriteSession(workDir, sessionID string, content []byte) error {
	path, err := e.SessionPath(workDir, sessionID)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, content); err != nil {
		return fmt.Errorf("write session %s: %w", sessionID, err)
	}
	return nil
}

// writeFileAtomic writes content to path through a temporary file in the
// same folder, synced, then renamed over path.
func writeFileAtomic(path string, content []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // CreateTemp makes it 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(content); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
