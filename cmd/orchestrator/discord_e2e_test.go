package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
)

// TestRunAsksOnDiscord: `run --surface discord` posts the question to a
// fake Discord; a stranger's click is refused, an allowed user's click on
// "JWT" resumes the session with that option, and the message ends with its
// buttons disabled and marked answered.
func TestRunAsksOnDiscord(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	dc := discordtest.NewServer(t)
	alice := discordtest.User{ID: "80351110224678912", Name: "alice"}
	mallory := discordtest.User{ID: "80351110224678913", Name: "mallory"}
	e.writeConfig(fmt.Sprintf("  discord:\n    enabled: true\n    token: %q\n    channel_id: %q\n    thread_per_run: false\n    allow_users: [%q]\n    api_url: %q\n",
		dc.Token(), discordtest.ChannelID, alice.ID, dc.URL))

	type result struct{ code int }
	done := make(chan result, 1)
	go func() {
		code, _, _ := e.run("", "run", "--surface", "discord", "--prompt", "Implement spec X")
		done <- result{code}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msg, err := dc.WaitMessage(ctx, discordtest.ChannelID, func(m *discordgo.Message) bool {
		return len(m.Components) > 0 && len(m.Embeds) > 0 && strings.Contains(m.Embeds[0].Description, "Which auth method?")
	})
	if err != nil {
		t.Fatalf("no question message: %v", err)
	}
	// A stranger is refused, privately.
	id, err := dc.ClickButton(mallory, msg.ID, "OAuth2")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := dc.WaitResponse(ctx, id); err != nil || !r.Ephemeral {
		t.Fatalf("stranger's click: %+v, %v; want an ephemeral refusal", r, err)
	}
	// The allowed user's click may race the surface's listener on a slow
	// machine: click again until it is acknowledged.
	for {
		id, err := dc.ClickButton(alice, msg.ID, "JWT")
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := dc.WaitResponse(rctx, id)
		rcancel()
		if err == nil && r.Type == discordgo.InteractionResponseDeferredMessageUpdate {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the click was never acknowledged")
		}
	}
	select {
	case res := <-done:
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
	final, _ := dc.Message(msg.ID)
	if !strings.Contains(final.Content, "Answered by") || !strings.Contains(final.Content, "alice") {
		t.Errorf("message content = %q, want it marked answered by alice", final.Content)
	}
	for _, row := range final.Components {
		ar, ok := row.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, c := range ar.Components {
			if b, ok := c.(*discordgo.Button); ok && !b.Disabled {
				t.Errorf("button %q still enabled", b.Label)
			}
		}
	}
}
