//go:build unix

package executor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestE2EResumeAfterAKilledTurn measures what a `--resume` sends after a
// turn was killed (Process.Kill, as when a run's lease is lost) while its
// API call was under way, so that recovery knows whether the prompt reached
// the model's conversation (SessionTranscriptHas):
//   - killed once the prompt is the session's "user" entry, with no reply
//     after it: the resumed request carries the prompt, once, followed by an
//     assistant message the CLI makes up, then the new prompt;
//   - killed before that entry, when only the "queue-operation" entry holds
//     the prompt's text (the file as it was then: the CLI only appends, so
//     it is the killed file cut before the "user" entry): the resumed request
//     lacks the prompt. SessionTranscriptHas must tell them apart.
func TestE2EResumeAfterAKilledTurn(t *testing.T) {
	const answer = "ANSWER-7f3 use OAuth2"
	release := make(chan struct{})
	x := newE2E(t,
		fakeapi.Rule{When: "first prompt", Reply: fakeapi.Reply{Text: "First reply."}},
		fakeapi.Rule{When: "ANSWER-7f3", Times: 1, Respond: func(fakeapi.Request) fakeapi.Reply {
			<-release // the model never answers before the kill
			return fakeapi.Reply{Text: "too late"}
		}},
	)
	t.Cleanup(func() { close(release) })
	e := x.executor(func(c *Config) { c.ControlProtocol = true })
	_, o1 := x.run(e, Request{Prompt: "first prompt"})
	if o1.Status != StatusSuccess || o1.SessionID == "" {
		t.Fatalf("first turn: %+v", o1)
	}
	sid := o1.SessionID

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := e.Start(ctx, Request{Prompt: answer, Resume: sid, WorkDir: x.wd})
	if err != nil {
		t.Fatal(err)
	}
	for {
		reqs, err := x.api.WaitRequests(ctx, len(x.api.Requests())+1)
		if err != nil {
			t.Fatalf("the answer's API call never came: %v", err)
		}
		if strings.Contains(reqs[len(reqs)-1].LastUserText, "ANSWER-7f3") {
			break
		}
	}
	// The CLI writes the "user" entry when it makes the API call (measured:
	// 0-100 ms after the request arrives); poll for it.
	for has := false; !has; {
		if has, err = e.SessionTranscriptHas(sid, "ANSWER-7f3"); err != nil && !errors.Is(err, ErrSessionFileNotFound) {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("the answer never became the session's user entry while its API call was under way")
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.Kill()
	for run.Next() {
	}
	killed, err := e.ReadSession(x.wd, sid)
	if err != nil {
		t.Fatal(err)
	}
	var queued []byte
	lines := bytes.SplitAfter(killed, []byte("\n"))
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"type":"user"`)) && bytes.Contains(l, []byte("ANSWER-7f3")) {
			queued = bytes.Join(lines[:i], nil)
			break
		}
	}
	if !bytes.Contains(queued, []byte(`"type":"queue-operation"`)) || !bytes.Contains(queued, []byte("ANSWER-7f3")) {
		t.Fatalf("the killed session has no queued entry of the answer before its user entry:\n%s", killed)
	}

	// resume writes state as the session file and continues it; it returns
	// the messages of the resumed request.
	resume := func(state []byte) []fakeapi.Message {
		t.Helper()
		if err := e.WriteSession(x.wd, sid, state); err != nil {
			t.Fatal(err)
		}
		n := len(x.api.Requests())
		_, o := x.run(e, Request{Prompt: "continue", Resume: sid})
		reqs := x.api.Requests()
		if o.Status != StatusSuccess || len(reqs) <= n {
			t.Fatalf("resume: %+v, %d requests", o, len(reqs)-n)
		}
		for _, r := range reqs[n:] {
			if r.LastUserText == "continue" {
				return r.Messages
			}
		}
		t.Fatalf("no request of the resume ends with its prompt")
		return nil
	}
	count := func(msgs []fakeapi.Message, role, s string) int {
		n := 0
		for _, m := range msgs {
			if m.Role == role && strings.Contains(m.Text(), s) {
				n++
			}
		}
		return n
	}

	if has, err := e.SessionTranscriptHas(sid, "ANSWER-7f3"); !has || err != nil {
		t.Fatalf("SessionTranscriptHas of the killed session = %v, %v; want true", has, err)
	}
	msgs := resume(killed)
	if n := count(msgs, "user", "ANSWER-7f3"); n != 1 {
		t.Errorf("killed after its user entry: the resumed request has the answer %d times, want once: %+v", n, msgs)
	}
	t.Logf("after a dangling prompt the CLI sends an assistant message %q", func() string {
		for i, m := range msgs {
			if m.Role == "user" && strings.Contains(m.Text(), "ANSWER-7f3") && i+1 < len(msgs) {
				return msgs[i+1].Text()
			}
		}
		return ""
	}())

	if err := e.WriteSession(x.wd, sid, queued); err != nil {
		t.Fatal(err)
	}
	if has, err := e.SessionTranscriptHas(sid, "ANSWER-7f3"); has || err != nil {
		t.Fatalf("SessionTranscriptHas of the session with the answer only queued = %v, %v; want false", has, err)
	}
	if n := count(resume(queued), "user", "ANSWER-7f3"); n != 0 {
		t.Errorf("killed before its user entry: the resumed request has the answer %d times, want none (the CLI does not send queued text)", n)
	}
}
