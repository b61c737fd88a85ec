package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
)

// TestRememberOnSlackE2E: alice's click on "JWT" answers the spec's
// question on Slack; a message only she sees offers "Remember for this spec
// (7 days)"; her click keeps the answer as a rule (she is told which) while
// the run still works (the model's reply waits for it). The spec's next run
// posts nothing on Slack and its model gets the remembered answer.
func TestRememberOnSlackE2E(t *testing.T) {
	t.Parallel()
	kept := make(chan struct{})
	e := newE2E(t,
		fakeapi.Rule{When: "Implement spec X", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		fakeapi.Rule{When: answerRule, Respond: func(r fakeapi.Request) fakeapi.Reply {
			select { // the first run works until the rule is kept
			case <-kept:
			case <-time.After(3 * time.Minute):
			}
			label := "nothing"
			if strings.Contains(r.LastUserText, "JWT") {
				label = "JWT"
			}
			return fakeapi.Reply{Text: "Implemented with " + label + "."}
		}},
	)
	sl := slacktest.NewServer(t)
	e.writeConfig(slackConfig(sl, true))
	spec := filepath.Join(e.dir, "nightly.md")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf("---\nname: nightly\nworkdir: %q\nsurfaces: [slack]\n---\nImplement spec X\n", filepath.Join(e.dir, "work"))), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", spec)
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); return err })
	ephemeral := func(what string, match func(slacktest.Ephemeral) bool) slacktest.Ephemeral {
		t.Helper()
		var got slacktest.Ephemeral
		if err := sl.WaitFor(ctx, func() bool {
			for _, x := range sl.Ephemerals() {
				if x.User == slackAlice.ID && match(x) {
					got = x
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("no %s for alice: %v", what, err)
		}
		return got
	}
	offer := ephemeral("offer to remember", func(x slacktest.Ephemeral) bool {
		return strings.Contains(string(x.Blocks), "Remember for this spec (7 days)")
	})
	slackRetry(ctx, t, func() error {
		_, err := sl.ClickEphemeral(slackAlice, offer.TS, "Remember for this spec (7 days)")
		return err
	})
	ephemeral("the rule kept", func(x slacktest.Ephemeral) bool {
		return strings.Contains(x.Text, "kept as rule r") && strings.Contains(x.Text, "for spec nightly")
	})
	close(kept)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("the first run: exit %d", code)
		}
	case <-ctx.Done():
		t.Fatal("the first run did not finish")
	}
	rules, err := e.store().Rules(context.Background(), store.RuleFilter{})
	if err != nil || len(rules) != 1 || rules[0].MadeBy != "alice (slack "+slackAlice.ID+")" || rules[0].Surface != "slack" {
		t.Fatalf("rules = %+v, %v", rules, err)
	}

	code, out, _ := e.run("", "run", spec)
	if code != 0 || !strings.Contains(out, "Implemented with JWT") {
		t.Fatalf("the second run: exit %d:\n%s", code, out)
	}
	n := 0
	for _, m := range sl.Messages() {
		if strings.Contains(string(m.Blocks), "Which auth method?") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d questions posted on Slack, want 1 (the second run asks nothing)", n)
	}
	if n := e.answerRequests(); n != 2 {
		t.Errorf("answers reached the model %d times, want 2", n)
	}
}
