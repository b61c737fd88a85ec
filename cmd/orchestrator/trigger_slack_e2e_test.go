package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
)

// TestSlackMentionStartsRun: `serve` with triggers.slack and the real CLI.
// Alice's "@orchestrator run login …", delivered twice by Slack, starts one
// run, which lives in her message's thread (without thread_per_run): its
// question is asked there, her click resumes it once, and its end is said
// there. A stranger's mention, delivered twice, gets one ephemeral refusal
// and starts nothing.
func TestSlackMentionStartsRun(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	sl := slacktest.NewServer(t)
	specDir := filepath.Join(t.TempDir(), "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(specDir, "login.md"), []byte("---\nname: login\n---\nImplement spec X\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(slackConfig(sl, false) + fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\ntriggers:\n  slack:\n    enabled: true\n", specDir))
	startServe(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mention := "<@" + slacktest.BotUserID + ">"

	top := sl.PostAsUser(slackAlice, "", mention+" run login add a login page")
	for range 2 { // Slack redelivers an event it thinks was lost
		slackRetry(ctx, t, func() error {
			_, err := sl.Send("events_api", slacktest.AppMention("Ev0ALICE01", slackAlice, top, ""), false)
			return err
		})
	}
	odd := sl.PostAsUser(slackMallory, top.TS, mention+" run login")
	for range 2 {
		slackRetry(ctx, t, func() error {
			_, err := sl.Send("events_api", slacktest.AppMention("Ev0MALLORY", slackMallory, odd, ""), false)
			return err
		})
	}

	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	if msg.ThreadTS != top.TS {
		t.Errorf("the question is in thread %q, want the mention's thread %s", msg.ThreadTS, top.TS)
	}
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); return err })
	if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ThreadTS == top.TS && strings.Contains(m.Text, "The run done")
	}); err != nil {
		t.Fatalf("the run's end is not in the mention's thread: %v", err)
	}
	st := e.store()
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != store.RunDone || runs[0].FinalText != "Implemented with JWT." || runs[0].Spec != "login" {
		t.Fatalf("runs = %+v, want one done run of spec login", runs)
	}
	if !strings.Contains(runs[0].Prompt, "add a login page") || !strings.Contains(runs[0].Prompt, "BEGIN MESSAGE") {
		t.Errorf("prompt = %q, want the spec's body and the message quoted", runs[0].Prompt)
	}
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Started run") }); err != nil {
		t.Fatal(err)
	}
	if err := sl.WaitFor(ctx, func() bool { return len(sl.Ephemerals()) > 0 }); err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, m := range sl.Messages() {
		if strings.Contains(m.Text, "Started run") {
			started++
			if m.ThreadTS != top.TS || !strings.Contains(m.Text, runs[0].ID) {
				t.Errorf("reply %+v: want it in the mention's thread naming run %s", m, runs[0].ID)
			}
		}
	}
	if started != 1 {
		t.Errorf("%d replies saying a run started, want 1", started)
	}
	// Mallory gets one refusal; alice, who answered, only the offer to
	// remember her answer (docs/rules.md).
	var toMallory []string
	for _, m := range sl.Ephemerals() {
		switch m.User {
		case slackMallory.ID:
			toMallory = append(toMallory, m.Text)
		case slackAlice.ID:
			if !strings.Contains(m.Text, "Remember it for this spec") {
				t.Errorf("ephemeral to alice %q, want only the offer to remember her answer", m.Text)
			}
		default:
			t.Errorf("ephemeral %+v to nobody in the test", m)
		}
	}
	if len(toMallory) != 1 {
		t.Errorf("ephemerals to mallory = %q, want one refusal", toMallory)
	}
	noSlackToken(t, sl, []string{e.state}, "")
}
