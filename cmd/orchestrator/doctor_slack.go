package main

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/slack-go/slack"
)

// doctorSlack checks that the bot token works and the bot can post in the
// channel (auth.test, then conversations.info: the bot is a member, and
// chat:write among the token's scopes when Slack lists them), and that the
// app-level token opens Socket Mode connections.
func (m *Main) doctorSlack(ctx context.Context, d *doctor) {
	sc := m.Config.Surfaces.Slack
	if !sc.Enabled {
		return
	}
	const what = "slack"
	if sc.BotToken == "" || (sc.AppToken == "" && sc.SigningSecret == "") || sc.Channel == "" {
		return // reported with the configuration's problems
	}
	opts := []slack.Option{slack.OptionHTTPClient(d.hc), slack.OptionAppLevelToken(sc.AppToken)}
	if sc.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(sc.APIURL, "/")+"/"))
	}
	api := slack.New(sc.BotToken, opts...)
	clean := func(err error) string {
		s := err.Error()
		for _, t := range []string{sc.BotToken, sc.AppToken, sc.SigningSecret} {
			if t == "" {
				continue
			}
			s = strings.ReplaceAll(s, t, "[REDACTED]")
		}
		return s
	}
	me, err := api.AuthTestContext(ctx)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) || strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "not_authed") {
			d.fail(what, "the bot token of surfaces.slack.bot_token is refused (%s): reinstall the app (OAuth & Permissions) and put its Bot User OAuth Token in the environment variable it reads", clean(err))
			return
		}
		d.fail(what, "%s: check surfaces.slack.api_url and the network", clean(err))
		return
	}
	if scopes := me.Header.Get("X-OAuth-Scopes"); scopes != "" {
		have := strings.Split(strings.ReplaceAll(scopes, " ", ""), ",")
		if !slices.Contains(have, "chat:write") {
			d.fail(what, "the bot token lacks the scope chat:write (it has %s): add it under OAuth & Permissions and reinstall the app", scopes)
			return
		}
	}
	ch, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: sc.Channel})
	if err != nil {
		d.fail(what, "the bot %s cannot see the channel %s (surfaces.slack.channel) (%s): check the ID; a private channel needs groups:read and the bot invited", me.User, sc.Channel, clean(err))
		return
	}
	if !ch.IsMember {
		d.fail(what, "the bot %s is not a member of the channel %s (surfaces.slack.channel): invite it there (/invite @%s)", me.User, sc.Channel, me.User)
		return
	}
	if sc.AppToken == "" {
		events := ""
		if m.Config.Triggers.Slack.Enabled {
			events = ", mentions (triggers.slack: the app_mention event under Event Subscriptions) to /webhooks/slack/events"
		}
		d.ok(what, "the bot %s can post in the channel %s; clicks come over HTTP (signing_secret) to /webhooks/slack%s", me.User, sc.Channel, events)
		return
	}
	if _, _, err := slackOpenConnection(ctx, api); err != nil {
		d.fail(what, "the app-level token of surfaces.slack.app_token cannot open a Socket Mode connection (%s): turn Socket Mode on and create a token with connections:write (Basic Information, App-Level Tokens)", clean(err))
		return
	}
	d.ok(what, "the bot %s can post in the channel %s, and Socket Mode opens", me.User, sc.Channel)
}

// slackOpenConnection asks for a Socket Mode URL (apps.connections.open)
// without connecting to it.
func slackOpenConnection(ctx context.Context, api *slack.Client) (*slack.SocketModeConnection, string, error) {
	return api.StartSocketModeContext(ctx)
}
