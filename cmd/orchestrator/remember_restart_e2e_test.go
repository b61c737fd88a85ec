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

// dbMarker is the question of the other spec of the restart tests.
const dbMarker = `<!--QUESTION:{"questions":[{"question":"Which database?","header":"DB","options":[` +
	`{"label":"SQLite","description":"One file"},{"label":"PostgreSQL","description":"A server"}]}]}-->`

// rememberRestartE2E is a test directory with two specs on one surface:
// nightly asks "Which auth method?", other asks "Which database?"; both
// finish once answered.
func rememberRestartE2E(t *testing.T, surface string) (e *e2e, nightly, other string) {
	t.Helper()
	e = newE2E(t,
		fakeapi.Rule{When: "Implement spec X", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		fakeapi.Rule{When: "Implement spec Y", Reply: fakeapi.Reply{Text: "I need a decision.\n" + dbMarker}},
		fakeapi.Rule{When: answerRule, Respond: func(r fakeapi.Request) fakeapi.Reply {
			for _, label := range []string{"JWT", "SQLite"} {
				if strings.Contains(r.LastUserText, label) {
					return fakeapi.Reply{Text: "Implemented with " + label + "."}
				}
			}
			return fakeapi.Reply{Text: "Implemented with nothing."}
		}},
	)
	nightly, other = filepath.Join(e.dir, "nightly.md"), filepath.Join(e.dir, "other.md")
	for path, spec := range map[string]string{nightly: "nightly\n---\nImplement spec X", other: "other\n---\nImplement spec Y"} {
		name, prompt, _ := strings.Cut(spec, "\n---\n")
		body := fmt.Sprintf("---\nname: %s\nworkdir: %q\nsurfaces: [%s]\n---\n%s\n", name, filepath.Join(e.dir, "work"), surface, prompt)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return e, nightly, other
}

// runInBackground runs `orchestrator run spec` and sends its exit code.
func runInBackground(e *e2e, spec string) <-chan int {
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", spec)
		done <- code
	}()
	return done
}

func waitExit(ctx context.Context, t *testing.T, what string, done <-chan int) {
	t.Helper()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("%s: exit %d", what, code)
		}
	case <-ctx.Done():
		t.Fatalf("%s did not finish", what)
	}
}

// checkRememberedOnce checks the one rule, made by who on surface, and that
// the nightly spec's next run asks nothing and gets the remembered answer.
func checkRememberedOnce(t *testing.T, e *e2e, nightly, who, surface string) {
	t.Helper()
	rules, err := e.store().Rules(context.Background(), store.RuleFilter{All: true})
	if err != nil || len(rules) != 1 || rules[0].MadeBy != who || rules[0].Surface != surface || rules[0].ScopeValue != "nightly" {
		t.Fatalf("rules = %+v, %v; want one nightly rule of %s", rules, err, who)
	}
	code, out, _ := e.run("", "run", nightly)
	if code != 0 || !strings.Contains(out, "Implemented with JWT") {
		t.Fatalf("nightly's next run: exit %d:\n%s", code, out)
	}
}

// TestRememberAfterRestartOnDiscordE2E: alice answers nightly's question on
// Discord and the run ends, its process with it, before she clicks
// "Remember for this spec (7 days)". Her click reaches the next process
// (a run of another spec, waiting on Discord), which finds the offer in the
// store and keeps exactly one rule; her second click is told the offer
// was taken. Nightly's next run posts nothing and its model gets JWT.
func TestRememberAfterRestartOnDiscordE2E(t *testing.T) {
	t.Parallel()
	e, nightly, other := rememberRestartE2E(t, "discord")
	dc := discordtest.NewServer(t)
	alice := discordtest.User{ID: "80351110224678912", Name: "alice"}
	e.writeConfig(fmt.Sprintf("  discord:\n    enabled: true\n    token: %q\n    channel_id: %q\n    thread_per_run: false\n    allow_users: [%q]\n    api_url: %q\n",
		dc.Token(), discordtest.ChannelID, alice.ID, dc.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	asks := func(text string) func(m *discordgo.Message) bool {
		return func(m *discordgo.Message) bool {
			return len(m.Components) > 0 && len(m.Embeds) > 0 && strings.Contains(m.Embeds[0].Description, text)
		}
	}
	// click clicks until a surface acknowledges it (its listener may not be
	// ready yet on a slow machine) and returns the response.
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
	deferred := func(r discordtest.Response) bool { return r.Type == discordgo.InteractionResponseDeferredMessageUpdate }

	first := runInBackground(e, nightly)
	msg, err := dc.WaitMessage(ctx, discordtest.ChannelID, asks("Which auth method?"))
	if err != nil {
		t.Fatalf("no question message: %v", err)
	}
	r := click(func() (string, error) { return dc.ClickButton(alice, msg.ID, "JWT") }, deferred)
	offer, err := dc.WaitFollowup(ctx, r.InteractionID)
	if err != nil || !offer.Ephemeral {
		t.Fatalf("offer = %+v, %v; want an ephemeral follow-up", offer, err)
	}
	waitExit(ctx, t, "nightly's first run", first)

	next := runInBackground(e, other) // the next process, listening on Discord
	dbMsg, err := dc.WaitMessage(ctx, discordtest.ChannelID, asks("Which database?"))
	if err != nil {
		t.Fatalf("no question message of the other spec: %v", err)
	}
	remember := func() (string, error) {
		return dc.ClickFollowup(alice, offer.MessageID, "Remember for this spec (7 days)")
	}
	kr := click(remember, func(r discordtest.Response) bool { return r.Data != nil })
	if !kr.Ephemeral || !strings.Contains(kr.Data.Content, "kept as rule r") || !strings.Contains(kr.Data.Content, "for spec nightly") {
		t.Fatalf("response = %+v, want the rule kept, ephemerally", kr.Data)
	}
	again := click(remember, func(r discordtest.Response) bool { return r.Data != nil })
	if !again.Ephemeral || !strings.Contains(again.Data.Content, "no longer open") {
		t.Errorf("second click's response = %+v, want the offer taken", again.Data)
	}
	click(func() (string, error) { return dc.ClickButton(alice, dbMsg.ID, "SQLite") }, deferred)
	waitExit(ctx, t, "the other spec's run", next)

	checkRememberedOnce(t, e, nightly, "alice (discord "+alice.ID+")", "discord")
	n := 0
	for _, m := range dc.Messages(discordtest.ChannelID) {
		if asks("Which auth method?")(m) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("nightly's question posted %d times on Discord, want 1 (its next run asks nothing)", n)
	}
	if n := e.answerRequests(); n != 3 {
		t.Errorf("answers reached the model %d times, want 3", n)
	}
}

// TestRememberAfterRestartOnSlackE2E: the same on Slack: alice's click on
// the offer after nightly's process ended reaches the next process, which
// keeps exactly one rule; her second click is told the offer was taken;
// nightly's next run posts nothing.
func TestRememberAfterRestartOnSlackE2E(t *testing.T) {
	t.Parallel()
	e, nightly, other := rememberRestartE2E(t, "slack")
	sl := slacktest.NewServer(t)
	e.writeConfig(slackConfig(sl, true))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
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

	first := runInBackground(e, nightly)
	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); return err })
	offer := ephemeral("offer to remember", func(x slacktest.Ephemeral) bool {
		return strings.Contains(string(x.Blocks), "Remember for this spec (7 days)")
	})
	waitExit(ctx, t, "nightly's first run", first)

	next := runInBackground(e, other) // the next process, listening on Slack
	dbMsg := slackQuestion(ctx, t, sl, "Which database?")
	remember := func() error {
		_, err := sl.ClickEphemeral(slackAlice, offer.TS, "Remember for this spec (7 days)")
		return err
	}
	slackRetry(ctx, t, remember)
	ephemeral("the rule kept", func(x slacktest.Ephemeral) bool {
		return strings.Contains(x.Text, "kept as rule r") && strings.Contains(x.Text, "for spec nightly")
	})
	slackRetry(ctx, t, remember)
	ephemeral("the offer taken", func(x slacktest.Ephemeral) bool { return strings.Contains(x.Text, "no longer open") })
	slackRetry(ctx, t, func() error { _, err := sl.ClickButton(slackAlice, dbMsg.TS, "SQLite"); return err })
	waitExit(ctx, t, "the other spec's run", next)

	checkRememberedOnce(t, e, nightly, "alice (slack "+slackAlice.ID+")", "slack")
	n := 0
	for _, m := range sl.Messages() {
		if strings.Contains(string(m.Blocks), "Which auth method?") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("nightly's question posted %d times on Slack, want 1 (its next run asks nothing)", n)
	}
	if n := e.answerRequests(); n != 3 {
		t.Errorf("answers reached the model %d times, want 3", n)
	}
}
