package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
)

var (
	slackAlice   = slacktest.User{ID: "U0ALICE001", Name: "alice"}
	slackMallory = slacktest.User{ID: "U0MALLORY1", Name: "mallory"}
)

func slackConfig(sl *slacktest.Server, threadPerRun bool) string {
	return fmt.Sprintf("  slack:\n    enabled: true\n    bot_token: %q\n    app_token: %q\n    channel: %s\n    thread_per_run: %v\n    allow_users: [%s]\n    api_url: %q\n",
		sl.BotToken(), sl.AppToken(), slacktest.ChannelID, threadPerRun, slackAlice.ID, sl.APIURL())
}

// questionMessage waits for the message that asks text.
func slackQuestion(ctx context.Context, t *testing.T, sl *slacktest.Server, text string) slacktest.Message {
	t.Helper()
	m, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool {
		return strings.Contains(string(m.Blocks), text) && strings.Contains(string(m.Blocks), `"actions"`)
	})
	if err != nil {
		t.Fatalf("no question message asking %q: %v", text, err)
	}
	return m
}

// slackRetry repeats act while Slack could not deliver it (no connection
// yet, or no acknowledgement): a person clicking again.
func slackRetry(ctx context.Context, t *testing.T, act func() error) {
	t.Helper()
	for {
		err := act()
		if err == nil {
			return
		}
		if !errors.Is(err, slacktest.ErrNotConnected) && !errors.Is(err, slacktest.ErrNoAck) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never delivered: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// noSlackToken fails if a token of sl appears in texts or in any file under
// dirs (the store, transcripts, logs, the work tree).
func noSlackToken(t *testing.T, sl *slacktest.Server, dirs []string, texts ...string) {
	t.Helper()
	for _, tok := range []string{sl.BotToken(), sl.AppToken(), sl.SigningSecret()} {
		for i, s := range texts {
			if strings.Contains(s, tok) {
				t.Errorf("output %d holds a Slack token", i)
			}
		}
		for _, dir := range dirs {
			filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				b, err := os.ReadFile(path)
				if err == nil && bytes.Contains(b, []byte(tok)) {
					t.Errorf("%s holds a Slack token", filepath.Base(path))
				}
				return nil
			})
		}
	}
}

// TestRunAsksOnSlack: `run --surface slack` posts the question in the run's
// thread on a fake Slack (its first post rate limited: waited out). While it
// waits, Slack sends a disconnect envelope and then the connection drops;
// a stranger's click gets an ephemeral refusal and changes nothing; the
// allowed user's click on "JWT" resumes the session exactly once, and the
// message is edited once, to say who answered, its buttons removed. No
// Slack token is in the output or the state directory.
func TestRunAsksOnSlack(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	sl := slacktest.NewServer(t)
	sl.RateLimit("chat.postMessage", 1)
	e.writeConfig(slackConfig(sl, true))

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := e.run("", "run", "--surface", "slack", "--prompt", "Implement spec X")
		done <- result{code, out, errOut}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	if msg.ThreadTS == "" {
		t.Errorf("the question is not in a thread of the run")
	}
	if n := sl.Calls("chat.postMessage"); n < 3 {
		t.Errorf("chat.postMessage called %d times, want the 429 retried", n)
	}

	// Slack asks to reconnect, then the new connection drops.
	g := sl.Generation()
	sl.Disconnect("refresh_requested")
	if err := sl.WaitFor(ctx, func() bool { return sl.Renewed(g) }); err != nil {
		t.Fatalf("no reconnection after disconnect: %v", err)
	}
	g = sl.Generation()
	sl.Drop()
	if err := sl.WaitFor(ctx, func() bool { return sl.Renewed(g) }); err != nil {
		t.Fatalf("no reconnection after a dropped connection: %v", err)
	}

	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackMallory, msg.TS, "OAuth2"); return err })
	if err := sl.WaitFor(ctx, func() bool {
		for _, e := range sl.Ephemerals() {
			if e.User == slackMallory.ID && strings.Contains(e.Text, "not allowed") {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no ephemeral refusal for the stranger: %v", err)
	}
	if m, _ := sl.Message(msg.TS); m.Updates != 0 {
		t.Errorf("the stranger's click edited the message")
	}

	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); return err })
	var res result
	select {
	case res = <-done:
		if res.code != 0 {
			t.Fatalf("run exit %d", res.code)
		}
	case <-ctx.Done():
		t.Fatal("the run did not finish")
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("answers sent %d times", n)
	}
	if run := e.onlyRun(); run.FinalText != "Implemented with JWT." {
		t.Fatalf("final = %q", run.FinalText)
	}
	final, _ := sl.Message(msg.TS)
	if final.Updates != 1 {
		t.Errorf("the message was edited %d times, want once", final.Updates)
	}
	if !strings.Contains(string(final.Blocks), "Answered by *alice*") || strings.Contains(string(final.Blocks), `"actions"`) {
		t.Errorf("final message blocks = %s, want it answered by alice without buttons", final.Blocks)
	}
	// The run's end is said in its thread.
	if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ThreadTS == msg.ThreadTS && strings.Contains(m.Text, "The run done")
	}); err != nil {
		t.Errorf("the run's end is not in its thread: %v", err)
	}
	noSlackToken(t, sl, []string{e.state, filepath.Join(e.dir, "work")}, res.out, res.errOut)
}

// TestAskUserQuestionOnSlack: the model's AskUserQuestion (a single-select
// question allowing free text, and a multi-select one) is one Slack
// message; the first is answered with the "Other…" form, the second with
// the multi-select menu, and the model gets both as it asked them.
func TestAskUserQuestionOnSlack(t *testing.T) {
	t.Parallel()
	ask := map[string]any{"questions": []any{
		map[string]any{"question": "Which auth method?", "header": "Auth", "multiSelect": false,
			"options": []any{map[string]any{"label": "OAuth2", "description": "o"}, map[string]any{"label": "JWT", "description": "j"}}},
		map[string]any{"question": "Which stores?", "header": "Store", "multiSelect": true,
			"options": []any{map[string]any{"label": "SQL", "description": "s"}, map[string]any{"label": "Redis", "description": "r"}}},
	}}
	e := newE2E(t,
		fakeapi.Rule{When: "ask me", Reply: fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "AskUserQuestion", Input: ask}}, Times: 1},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	)
	sl := slacktest.NewServer(t)
	e.writeConfig(slackConfig(sl, false))
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", "--surface", "slack", "--prompt", "ask me")
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	msg := slackQuestion(ctx, t, sl, "Which stores?")
	var tr string
	slackRetry(ctx, t, func() error { var err error; tr, err = sl.ClickButton(slackAlice, msg.TS, "Other…"); return err })
	view, err := sl.WaitView(ctx, tr)
	if err != nil {
		t.Fatalf("no form opened: %v", err)
	}
	if !strings.Contains(string(view.View), "Which auth method?") {
		t.Errorf("form = %s", view.View)
	}
	slackRetry(ctx, t, func() error { _, err := sl.SubmitView(slackAlice, view, "mTLS"); return err })
	// The second question's menu.
	if err := sl.WaitFor(ctx, func() bool { m, _ := sl.Message(msg.TS); return m.Updates >= 1 }); err != nil {
		t.Fatalf("the first answer is not shown: %v", err)
	}
	slackRetry(ctx, t, func() error { _, err := sl.Choose(slackAlice, msg.TS, "SQL", "Redis"); return err })
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-ctx.Done():
		t.Fatal("the run did not finish")
	}
	if run := e.onlyRun(); !strings.Contains(run.FinalText, `"Which auth method?"="mTLS"`) || !strings.Contains(run.FinalText, `"Which stores?"="SQL, Redis"`) {
		t.Errorf("final %q", run.FinalText)
	}
	final, _ := sl.Message(msg.TS)
	var blocks []map[string]any
	json.Unmarshal(final.Blocks, &blocks)
	for _, b := range blocks {
		if b["type"] == "actions" {
			t.Errorf("controls left on the answered message: %s", final.Blocks)
		}
	}
}

// TestSlackRestartWhileWaiting: the process asking on Slack dies (kill -9)
// once the question is posted; `serve` takes the run up, finds the message
// it posted (no second post), and a later click resumes the session once.
func TestSlackRestartWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	sl := slacktest.NewServer(t)
	e.writeConfig(slackConfig(sl, true) + fmt.Sprintf("\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n", filepath.Join(t.TempDir(), "no-specs")))
	cmd := e.child("", "", "run", "--surface", "slack", "--prompt", "Implement spec X")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	cmd.Process.Kill()
	cmd.Wait()
	posts := sl.Calls("chat.postMessage")

	startServe(t, e)
	st := e.store()
	// serve watches the set again: its click is taken (the store decides
	// also before the Watch).
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); return err })
	waitFor(t, "serve to finish the run", func() bool {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{})
		return err == nil && len(runs) == 1 && runs[0].Status == store.RunDone
	})
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if run := e.onlyRun(); run.FinalText != "Implemented with JWT." {
		t.Errorf("final = %q", run.FinalText)
	}
	questions := 0
	for _, m := range sl.Messages() {
		if strings.Contains(string(m.Blocks), "Which auth method?") {
			questions++
		}
	}
	if questions != 1 {
		t.Errorf("the question was posted %d times, want once (posts before the restart %d, after %d)", questions, posts, sl.Calls("chat.postMessage"))
	}
}

// TestRehearseOnSlack: `rehearse --surface slack` checks a Slack setup end
// to end: the scripted model's question is posted on the fake Slack, a
// click answers it, and the real CLI finishes with that option.
func TestRehearseOnSlack(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	sl := slacktest.NewServer(t)
	e.writeConfig(slackConfig(sl, true))
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out, _ := e.run("", "rehearse", "--surface", "slack", "--prompt", "Add a login page")
		done <- result{code, out}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool {
		return strings.Contains(string(m.Blocks), "Signed JWT") && strings.Contains(string(m.Blocks), `"actions"`)
	})
	if err != nil {
		t.Fatalf("no question on Slack: %v", err)
	}
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, m.TS, "Signed JWT"); return err })
	select {
	case r := <-done:
		if r.code != 0 || !strings.Contains(r.out, "Signed JWT") {
			t.Fatalf("exit %d:\n%s", r.code, r.out)
		}
		if strings.Contains(r.out, sl.BotToken()) || strings.Contains(r.out, sl.AppToken()) {
			t.Errorf("the output shows a token")
		}
	case <-ctx.Done():
		t.Fatal("the rehearsal did not finish")
	}
}
