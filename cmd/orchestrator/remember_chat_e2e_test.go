package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
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

// TestRememberOnDiscordE2E: the same on Discord: alice's click answers,
// an ephemeral follow-up offers to remember, her click on it keeps the
// rule (the ephemeral reply names it), and the spec's next run posts
// nothing on Discord.
func TestRememberOnDiscordE2E(t *testing.T) {
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
	dc := discordtest.NewServer(t)
	alice := discordtest.User{ID: "80351110224678912", Name: "alice"}
	e.writeConfig(fmt.Sprintf("  discord:\n    enabled: true\n    token: %q\n    channel_id: %q\n    thread_per_run: false\n    allow_users: [%q]\n    api_url: %q\n",
		dc.Token(), discordtest.ChannelID, alice.ID, dc.URL))
	spec := filepath.Join(e.dir, "nightly.md")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf("---\nname: nightly\nworkdir: %q\nsurfaces: [discord]\n---\nImplement spec X\n", filepath.Join(e.dir, "work"))), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", spec)
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	isQuestion := func(m *discordgo.Message) bool {
		return len(m.Components) > 0 && len(m.Embeds) > 0 && strings.Contains(m.Embeds[0].Description, "Which auth method?")
	}
	msg, err := dc.WaitMessage(ctx, discordtest.ChannelID, isQuestion)
	if err != nil {
		t.Fatalf("no question message: %v", err)
	}
	// click clicks until the surface acknowledges it (its listener may
	// not be ready yet on a slow machine) and returns the response.
	click := func(do func() (string, error), want func(discordtest.Response) bool) discordtest.Response {
		t.Helper()
		for {
			id, err := do()
			if err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := dc.WaitResponse(rctx, id)
			rcancel()
			if err == nil && want(r) {
				return r
			}
			if ctx.Err() != nil {
				t.Fatal("the click was never acknowledged")
			}
		}
	}
	r := click(func() (string, error) { return dc.ClickButton(alice, msg.ID, "JWT") },
		func(r discordtest.Response) bool { return r.Type == discordgo.InteractionResponseDeferredMessageUpdate })
	offer, err := dc.WaitFollowup(ctx, r.InteractionID)
	if err != nil || !offer.Ephemeral {
		t.Fatalf("offer = %+v, %v; want an ephemeral follow-up", offer, err)
	}
	kr := click(func() (string, error) {
		return dc.ClickFollowup(alice, offer.MessageID, "Remember for this spec (7 days)")
	},
		func(r discordtest.Response) bool { return r.Data != nil })
	if !kr.Ephemeral || !strings.Contains(kr.Data.Content, "kept as rule r") || !strings.Contains(kr.Data.Content, "for spec nightly") {
		t.Fatalf("response = %+v, want the rule kept, ephemerally", kr.Data)
	}
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
	if err != nil || len(rules) != 1 || rules[0].MadeBy != "alice (discord "+alice.ID+")" || rules[0].Surface != "discord" {
		t.Fatalf("rules = %+v, %v", rules, err)
	}

	code, out, _ := e.run("", "run", spec)
	if code != 0 || !strings.Contains(out, "Implemented with JWT") {
		t.Fatalf("the second run: exit %d:\n%s", code, out)
	}
	n := 0
	for _, m := range dc.Messages(discordtest.ChannelID) {
		if isQuestion(m) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d questions posted on Discord, want 1 (the second run asks nothing)", n)
	}
	if n := e.answerRequests(); n != 2 {
		t.Errorf("answers reached the model %d times, want 2", n)
	}
}
