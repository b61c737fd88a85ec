package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
)

// TestDoctorSlack: doctor says whether the Slack bot can post in its
// channel (a refused token, a channel the bot is not in, a good setup),
// without showing a token.
func TestDoctorSlack(t *testing.T) {
	t.Parallel()
	claude, _ := stubClaude(t, executor.TestedCLINewest)
	sl := slacktest.NewServer(t)
	conf := fmt.Sprintf("surfaces:\n  slack:\n    enabled: true\n    api_url: %q\n    channel: %s\n    allow_users: [U0ALICE001]\n    bot_token: ${SB}\n    app_token: ${SA}\n",
		sl.APIURL(), slacktest.ChannelID)
	env := map[string]string{"SB": sl.BotToken(), "SA": sl.AppToken()}
	dir := doctorDir(t, claude, conf)

	code, out, _ := inDir(t, dir, map[string]string{"SB": "xoxb-0000-wrong-token", "SA": sl.AppToken()}, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "surfaces.slack.bot_token is refused") {
		t.Errorf("wrong token: exit %d:\n%s", code, out)
	}
	sl.SetMember(slacktest.ChannelID, false)
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "is not a member of the channel "+slacktest.ChannelID) {
		t.Errorf("not a member: exit %d:\n%s", code, out)
	}
	sl.SetMember(slacktest.ChannelID, true)
	code, out, _ = inDir(t, dir, map[string]string{"SB": sl.BotToken(), "SA": "xapp-1-A1-0000-wrongapptoken"}, "", "doctor")
	if code != exitFailed || !strings.Contains(out, "surfaces.slack.app_token cannot open a Socket Mode connection") {
		t.Errorf("wrong app token: exit %d:\n%s", code, out)
	}
	code, out, _ = inDir(t, dir, env, "", "doctor")
	if code != 0 || !strings.Contains(out, "ok       slack: the bot orchestrator can post in the channel "+slacktest.ChannelID) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, sl.BotToken()) || strings.Contains(out, sl.AppToken()) {
		t.Errorf("doctor shows a token:\n%s", out)
	}
}
