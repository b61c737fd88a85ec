package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
)

// slackHTTPConfig is surfaces.slack for an app without Socket Mode: a
// signing secret, no app token.
func slackHTTPConfig(sl *slacktest.Server) string {
	return strings.Replace(slackConfig(sl, false), fmt.Sprintf("    app_token: %q\n", sl.AppToken()), fmt.Sprintf("    signing_secret: %q\n", sl.SigningSecret()), 1)
}

// postSlackEvent POSTs payload to url as Slack's Events API does, signed
// with secret, with header added (a retry's X-Slack-Retry-Num); it returns
// the status.
func postSlackEvent(t *testing.T, url, secret string, payload any, header map[string]string) int {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slacktest.Sign(secret, ts, body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlackMentionOverHTTPStartsRun: `serve` with triggers.slack and a
// Slack app without Socket Mode (signing_secret, no app_token), with the
// real CLI. Slack verifies the Events API URL (url_verification); alice's
// "@orchestrator run login …" POSTed there, then retried by Slack
// (X-Slack-Retry-Num), starts one run in her thread; its question is
// answered by one click, which comes over HTTP too; a forged mention (a
// bad signature) is refused 401 and starts nothing. A mention kept in the
// store's inbox by a serve that crashed after its 200 is taken on start.
func TestSlackMentionOverHTTPStartsRun(t *testing.T) {
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
	e.writeConfig(slackHTTPConfig(sl) + fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\ntriggers:\n  slack:\n    enabled: true\n", specDir))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mention := "<@" + slacktest.BotUserID + ">"
	// A mention acknowledged by a serve that crashed before its work ran:
	// kept in the store's inbox, it is taken when serve starts again.
	crashed := sl.PostAsUser(slackAlice, "", mention+" run nosuch before the crash")
	body, _ := json.Marshal(slacktest.AppMention("Ev0CRASHED", slackAlice, crashed, ""))
	inbox := e.store().InboxFor("slack")
	if err := inbox.Keep(ctx, "Ev0CRASHED", body); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, e)
	if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ThreadTS == crashed.TS && strings.Contains(m.Text, "no spec named `nosuch`")
	}); err != nil {
		t.Fatalf("the mention kept from before the crash was not taken: %v", err)
	}
	events := srv.base + "/webhooks/slack/events"
	if err := sl.UseHTTP(ctx, events, srv.base+"/webhooks/slack", slacktest.WithRetryDelays(0, 0, 0)); err != nil {
		t.Fatal(err)
	}

	top := sl.PostAsUser(slackAlice, "", mention+" run login add a login page")
	ev := slacktest.AppMention("Ev0HTTPALICE", slackAlice, top, "")
	if _, err := sl.Send("events_api", ev, false); err != nil {
		t.Fatal(err)
	}
	// Slack retries an event it thinks was lost: the same event_id.
	if code := postSlackEvent(t, events, sl.SigningSecret(), ev, map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}); code != http.StatusOK {
		t.Errorf("Slack's retry: %d, want 200", code)
	}
	forged := sl.PostAsUser(slackAlice, "", mention+" run login forged")
	if code := postSlackEvent(t, events, "not-the-signing-secret", slacktest.AppMention("Ev0FORGED01", slackAlice, forged, ""), nil); code != http.StatusUnauthorized {
		t.Errorf("a bad signature: %d, want 401", code)
	}

	msg := slackQuestion(ctx, t, sl, "Which auth method?")
	if msg.ThreadTS != top.TS {
		t.Errorf("the question is in thread %q, want the mention's thread %s", msg.ThreadTS, top.TS)
	}
	if _, err := sl.ClickButton(slackAlice, msg.TS, "JWT"); err != nil {
		t.Fatal(err)
	}
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
	if !strings.Contains(runs[0].Prompt, "add a login page") {
		t.Errorf("prompt = %q, want the mention's text", runs[0].Prompt)
	}
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if _, ok, err := st.TriggerByKey(ctx, "slack:event:Ev0FORGED01"); err != nil || ok {
		t.Errorf("the forged event was recorded (%v, %v)", ok, err)
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
	if kept, err := inbox.Kept(ctx); err != nil || len(kept) != 0 {
		t.Errorf("the inbox still keeps %+v (%v), want every event dropped once its work ran", kept, err)
	}
	if sl.Opens() != 0 {
		t.Errorf("a Socket Mode connection was opened without an app token")
	}
	noSlackToken(t, sl, []string{e.state}, srv.out.String())
}

// TestSlackTriggersOverHTTPConfig: validate and doctor take triggers.slack
// with surfaces.slack.signing_secret and no app_token, and doctor says
// where mentions come.
func TestSlackTriggersOverHTTPConfig(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLINewest)
	sl := slacktest.NewServer(t)
	conf := fmt.Sprintf("surfaces:\n  slack:\n    enabled: true\n    api_url: %q\n    channel: %s\n    allow_users: [U0ALICE001]\n    bot_token: ${SB}\n    signing_secret: ${SS}\n"+
		"triggers:\n  slack:\n    enabled: true\n", sl.APIURL(), slacktest.ChannelID)
	env := map[string]string{"SB": sl.BotToken(), "SS": sl.SigningSecret()}
	dir := doctorDir(t, claude, conf)
	if code, out, errOut := inDir(t, dir, env, "", "validate"); code != 0 {
		t.Errorf("validate: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut := inDir(t, dir, env, "", "doctor")
	if !strings.Contains(out, "ok       slack: the bot orchestrator can post in the channel "+slacktest.ChannelID) || !strings.Contains(out, "/webhooks/slack/events") {
		t.Errorf("doctor: exit %d:\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, sl.SigningSecret()) || strings.Contains(out+errOut, sl.BotToken()) {
		t.Errorf("a secret in the output:\n%s%s", out, errOut)
	}
}
