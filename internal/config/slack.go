package config

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	slackChannelID = regexp.MustCompile(`^[CG][A-Z0-9]{6,}$`)
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{6,}$`)
	slackGroupID   = regexp.MustCompile(`^S[A-Z0-9]{6,}$`)
)

// On implements SurfaceConfig.
func (s Slack) On() bool { return s.Enabled }

// Check implements SurfaceConfig. Token values are never shown.
func (s Slack) Check(c *Checker) {
	token := func(key, v, prefix, env, what string) {
		switch v = strings.TrimSpace(v); {
		case v == "":
			c.Add(key, "required when the Slack surface is enabled (set it to ${%s} and export that variable)", env)
		case strings.ContainsAny(v, " \t\r\n"):
			c.Add(key, "contains white space")
		case !strings.HasPrefix(v, prefix):
			c.Add(key, "want %s, which starts with %q", what, prefix)
		}
	}
	token("bot_token", s.BotToken, "xoxb-", "SLACK_BOT_TOKEN", "a bot token")
	if strings.TrimSpace(s.AppToken) == "" && strings.TrimSpace(s.SigningSecret) != "" {
		// Interactivity over HTTP on serve (POST /webhooks/slack).
	} else if strings.TrimSpace(s.AppToken) == "" {
		c.Add("app_token", "required when the Slack surface is enabled, unless signing_secret is set (set it to ${SLACK_APP_TOKEN} and export that variable: Socket Mode needs no public URL)")
	} else {
		token("app_token", s.AppToken, "xapp-", "SLACK_APP_TOKEN", "an app-level token with connections:write")
	}
	if v := s.SigningSecret; v != "" && strings.ContainsAny(v, " \t\r\n") {
		c.Add("signing_secret", "contains white space")
	}
	if s.RequestTimeout <= 0 {
		c.Add("request_timeout", "must be above zero, got %s", s.RequestTimeout)
	}
	switch {
	case s.Channel == "":
		c.Add("channel", "required when the Slack surface is enabled (a channel ID such as C0123456789)")
	case !slackChannelID.MatchString(s.Channel):
		c.Add("channel", "want a Slack channel ID (C… or G…, as in the channel's details), got %q", s.Channel)
	}
	if len(s.AllowUsers) == 0 && len(s.AllowGroups) == 0 {
		c.Add("allow_users", "allow_users and allow_groups are both empty: nobody could answer")
	}
	for i, id := range s.AllowUsers {
		if !slackUserID.MatchString(id) {
			c.Add(fmt.Sprintf("allow_users[%d]", i), "want a Slack user ID (U…), got %q", id)
		}
	}
	for i, id := range s.AllowGroups {
		if !slackGroupID.MatchString(id) {
			c.Add(fmt.Sprintf("allow_groups[%d]", i), "want a Slack user group ID (S…), got %q", id)
		}
	}
	if s.APIURL != "" {
		c.URL("api_url", s.APIURL, "http", "https")
	}
}
