package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
)

// TestGitHubAnswerWhileDownAcknowledged: the process asking on GitHub dies
// (kill -9); a maintainer answers while no process runs; `serve` takes the
// run up, finds the answer, and acknowledges it as it would live: the
// question comment names who answered, the answer gets 👀 and, once the
// session resumed with it, 🚀 — although the runner ends the surface's Ask
// as soon as the store has the answer.
func TestGitHubAnswerWhileDownAcknowledged(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, fmt.Sprintf("\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n", filepath.Join(t.TempDir(), "no-specs")))
	cmd := e.child("", "", "run", "--surface", "github", "--prompt", "Implement spec X")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	cmd.Process.Kill()
	cmd.Wait()
	answer := gh.AddComment(repo, issue, "alice", "2") // nobody runs

	startServe(t, e)
	st := e.store()
	waitFor(t, "serve to finish the run", func() bool {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{})
		return err == nil && len(runs) == 1 && runs[0].Status == store.RunDone
	})
	defer func() {
		if t.Failed() {
			for _, c := range gh.Comments(repo, issue) {
				t.Logf("comment %d by %s reactions %+v:\n%s", c.ID, c.Login, c.Reactions, c.Body)
			}
		}
	}()
	gh.WaitFor(t, time.Minute, "the question marked answered by alice, 👀 and 🚀 on the answer", func() bool {
		c, _ := gh.Comment(repo, answer)
		qc, _ := gh.Comment(repo, q.ID)
		var reactions []string
		for _, r := range c.Reactions {
			reactions = append(reactions, r.Content)
		}
		r := strings.Join(reactions, ",")
		return strings.Contains(r, "eyes") && strings.Contains(r, "rocket") && strings.Contains(qc.Body, "Answered by @") && strings.Contains(qc.Body, "alice:** JWT")
	})
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if qs := gh.Questions(repo); len(qs) != 1 {
		t.Errorf("question posted %d times, want once", len(qs))
	}
}

// TestDiscordAnswerWhileDownAcknowledged: the process asking on Discord
// dies (kill -9); an allowed user replies to the question while no process
// runs; `serve` takes the run up, reads the reply, and acknowledges it as
// it would live: ✅ on the reply, and the question's message says who
// answered.
func TestDiscordAnswerWhileDownAcknowledged(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	dc := discordtest.NewServer(t)
	alice := discordtest.User{ID: "80351110224678912", Name: "alice"}
	e.writeConfig(fmt.Sprintf("  discord:\n    enabled: true\n    token: %q\n    channel_id: %q\n    thread_per_run: false\n    allow_users: [%q]\n    accept_replies: true\n    api_url: %q\n\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n",
		dc.Token(), discordtest.ChannelID, alice.ID, dc.URL, filepath.Join(t.TempDir(), "no-specs")))
	cmd := e.child("", "", "run", "--surface", "discord", "--prompt", "Implement spec X")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msg, err := dc.WaitMessage(ctx, discordtest.ChannelID, func(m *discordgo.Message) bool {
		return len(m.Components) > 0 && len(m.Embeds) > 0 && strings.Contains(m.Embeds[0].Description, "Which auth method?")
	})
	if err != nil {
		t.Fatalf("no question message: %v", err)
	}
	// Killed once the question's message is recorded (a kill between the
	// post and the record posts it again: another matter).
	st := e.store()
	waitFor(t, "the question's message recorded", func() bool {
		sets, err := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
		if err != nil || len(sets) != 1 {
			return false
		}
		key := "discord/" + discordtest.ChannelID + "/message/" + sets[0].Set.ID + "/" + sets[0].Set.Questions[0].ID
		_, ok, _ := st.RefsFor("discord").Ref(ctx, key)
		return ok
	})
	cmd.Process.Kill()
	cmd.Wait()
	reply, err := dc.Reply(alice, msg.ID, "JWT") // nobody runs
	if err != nil {
		t.Fatal(err)
	}

	defer func() {
		if t.Failed() {
			for _, m := range dc.Messages(discordtest.ChannelID) {
				t.Logf("message %s by %+v ref %+v reactions %d: %q", m.ID, m.Author, m.MessageReference, len(m.Reactions), m.Content)
			}
		}
	}()
	startServe(t, e)
	waitFor(t, "serve to finish the run", func() bool {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{})
		return err == nil && len(runs) == 1 && runs[0].Status == store.RunDone
	})
	var shown string
	deadline := time.Now().Add(time.Minute)
	for {
		q, _ := dc.Message(msg.ID)
		r, _ := dc.Message(reply)
		reacted := false
		for _, re := range r.Reactions {
			reacted = reacted || (re.Emoji != nil && re.Emoji.Name == "✅")
		}
		shown = q.Content
		if reacted && strings.Contains(shown, "Answered by **alice**") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: ✅ on the reply %v, the question shows %q; want ✅ and who answered", reacted, shown)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
}

// TestServeGitHubHungRequest: GitHub holds the question's post unanswered
// (as if for ten minutes). Within request_timeout the post fails, /healthz
// says degraded naming the GitHub surface and orchestrator_surface_up is 0;
// once GitHub answers again, the run is asked again (posted once),
// answered, and /healthz is ok.
func TestServeGitHubHungRequest(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, fmt.Sprintf("    request_timeout: 500ms\n\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n", filepath.Join(t.TempDir(), "no-specs")))
	release := gh.Hang("POST", fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue))
	defer release()
	if code, _, errs := e.run("", "submit", "--surface", "github", "--prompt", "Implement spec X"); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errs)
	}
	s := startServe(t, e)
	waitFor(t, "/healthz to say the GitHub surface is not served", func() bool {
		code, body := s.get(t, "/healthz")
		return code == 200 && strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, `"surface":"github"`) && strings.Contains(body, "did not answer")
	})
	if v := s.metric(t, "orchestrator_surface_up", "surface", "github"); v != 0 {
		t.Errorf("orchestrator_surface_up{github} = %v while GitHub holds the post, want 0", v)
	}
	if n := len(gh.Questions(repo)); n != 0 {
		t.Fatalf("%d questions posted while GitHub held the post", n)
	}
	release()
	gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	gh.AddComment(repo, issue, "alice", "2")
	st := e.store()
	waitFor(t, "serve to finish the run", func() bool {
		runs, err := st.ListRuns(context.Background(), store.RunFilter{})
		return err == nil && len(runs) == 1 && runs[0].Status == store.RunDone
	})
	waitFor(t, "/healthz ok once GitHub answers", func() bool {
		code, body := s.get(t, "/healthz")
		return code == 200 && strings.Contains(body, `"status":"ok"`)
	})
	if v := s.metric(t, "orchestrator_surface_up", "surface", "github"); v != 1 {
		t.Errorf("orchestrator_surface_up{github} = %v once GitHub answers, want 1", v)
	}
	if n := len(gh.Questions(repo)); n != 1 {
		t.Errorf("question posted %d times, want once", n)
	}
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
}

// TestServeDiscordDisallowedIntent: a bot with accept_replies whose
// Message Content intent is not enabled in the developer portal: Discord
// closes its identify with 4014. serve's /healthz says degraded, naming the
// Discord surface, the code and what to enable; the surface logs one error
// and never connects again (real CLI).
func TestServeDiscordDisallowedIntent(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	dc := discordtest.NewServer(t)
	dc.DisallowIntents(discordtest.IntentMessageContent)
	e.writeConfig(fmt.Sprintf("  discord:\n    enabled: true\n    token: %q\n    channel_id: %q\n    thread_per_run: false\n    allow_users: [\"80351110224678912\"]\n    accept_replies: true\n    api_url: %q\n\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n",
		dc.Token(), discordtest.ChannelID, dc.URL, filepath.Join(t.TempDir(), "no-specs")))
	if code, _, errs := e.run("", "submit", "--surface", "discord", "--prompt", "Implement spec X"); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errs)
	}
	s := startServe(t, e)
	waitFor(t, "/healthz to name the disallowed intent", func() bool {
		code, body := s.get(t, "/healthz")
		return code == 200 && strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, `"surface":"discord"`) &&
			strings.Contains(body, "4014") && strings.Contains(body, "enable the Message Content intent")
	})
	if v := s.metric(t, "orchestrator_surface_up", "surface", "discord"); v != 0 {
		t.Errorf("orchestrator_surface_up{discord} = %v, want 0", v)
	}
	if n := dc.Dials(""); n != 1 {
		t.Errorf("%d gateway connections, want 1 (none after 4014)", n)
	}
	if n := strings.Count(s.out.String(), "Discord refuses the bot"); n != 1 {
		t.Errorf("%d error lines about it, want 1:\n%s", n, s.out.String())
	}
}
