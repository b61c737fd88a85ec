//go:build unix

package executor

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

// TestE2ESessionMovesToAnotherHome checks SessionPath against where the real
// CLI files a session (working directories reached through a symbolic link,
// with characters it replaces, and one past its 200-character name limit),
// and that a session file read on one machine (HOME) and written with
// WriteSession on another lets `--resume` there go on with the conversation.
func TestE2ESessionMovesToAnotherHome(t *testing.T) {
	x := newE2E(t,
		fakeapi.Rule{When: "Implement spec X", Reply: fakeapi.Reply{Text: questionText}},
		fakeapi.Rule{When: "OAuth2", Reply: fakeapi.Reply{Text: "You chose OAuth2."}},
	)
	root := t.TempDir()
	long := filepath.Join(root, strings.Repeat("deep.dir_é/", 20), "project")
	real := filepath.Join(root, "réal proj.v2")
	for _, d := range []string{long, real} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	e := x.executor(nil)
	for _, wd := range []string{link, long} {
		_, o1 := x.run(e, Request{Prompt: "Implement spec X", WorkDir: wd})
		if o1.Status != StatusSuccess || o1.SessionID == "" {
			t.Fatalf("first turn in %s: %+v", wd, o1)
		}
		path, err := e.SessionPath(wd, o1.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		found, err := SessionFile(e.ConfigDir(), o1.SessionID)
		if err != nil || found != path {
			t.Fatalf("the CLI filed the session at %s (%v); SessionPath says %s", found, err, path)
		}
		content, err := e.ReadSession(wd, o1.SessionID)
		if err != nil || !bytes.Contains(content, []byte("Implement spec X")) {
			t.Fatalf("ReadSession: %v, %d bytes", err, len(content))
		}

		// Another machine: an empty home, the same working directory.
		envB := clitest.Env(t, x.env["ANTHROPIC_BASE_URL"])
		eB := x.executor(func(c *Config) { c.Env = envB })
		if _, err := eB.ReadSession(wd, o1.SessionID); !errors.Is(err, ErrSessionFileNotFound) {
			t.Fatalf("ReadSession in an empty home: %v", err)
		}
		if err := eB.WriteSession(wd, o1.SessionID, content); err != nil {
			t.Fatal(err)
		}
		pathB, _ := eB.SessionPath(wd, o1.SessionID)
		if fi, err := os.Stat(pathB); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("written session file: %v %v", fi, err)
		}
		if fi, err := os.Stat(filepath.Dir(pathB)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("written session folder: %v %v", fi, err)
		}
		_, o2 := x.run(eB, Request{Prompt: "OAuth2", Resume: o1.SessionID, WorkDir: wd})
		if o2.Status != StatusSuccess || o2.FinalText != "You chose OAuth2." {
			t.Fatalf("resume in the other home: %+v", o2)
		}
		last := x.api.Requests()[len(x.api.Requests())-1]
		carried := false
		for _, m := range last.Messages {
			if m.Role == "assistant" && strings.Contains(m.Text(), "I need a decision.") {
				carried = true
			}
		}
		if !carried {
			t.Error("the resumed request does not carry the first turn's assistant text")
		}
		after, err := eB.ReadSession(wd, o1.SessionID)
		if err != nil || !bytes.HasPrefix(after, content) || len(after) == len(content) {
			t.Errorf("after the resume the session file is not the restored one with the turn appended (%v, %d → %d bytes)", err, len(content), len(after))
		}
	}
}
