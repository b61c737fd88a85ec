package config

import (
	"net/url"
	"strings"
)

// MinSecretLen is the least length of a secret value looked for inside
// other values (Secrets, HoldsSecret): a shorter one would match by chance.
const MinSecretLen = 8

// Secret is a secret the configuration holds: its key and its value.
type Secret struct {
	Key   string
	Value string
}

// Secrets returns the secrets the configuration holds, which the agent
// must never get whatever the variable carrying them is called: the GitHub
// token and webhook secret, the Discord token, the Slack tokens and signing secret, the git token, the web
// inbox's proxy secret, the database URL and the password in it. Empty
// values are left out.
func (c *Config) Secrets() []Secret {
	var out []Secret
	add := func(key, v string) {
		if strings.TrimSpace(v) != "" {
			out = append(out, Secret{Key: key, Value: v})
		}
	}
	add("surfaces.github.token", c.Surfaces.GitHub.Token)
	add("surfaces.github.webhook_secret", c.Surfaces.GitHub.WebhookSecret)
	add("surfaces.discord.token", c.Surfaces.Discord.Token)
	add("surfaces.slack.bot_token", c.Surfaces.Slack.BotToken)
	add("surfaces.slack.app_token", c.Surfaces.Slack.AppToken)
	add("surfaces.slack.signing_secret", c.Surfaces.Slack.SigningSecret)
	add("git.token", c.Git.Token)
	add("serve.web.proxy_secret", c.Serve.Web.ProxySecret)
	add("notify.secret", c.Notify.Secret)
	if c.DatabaseURL != "" {
		add("database_url", c.DatabaseURL)
		if u, err := url.Parse(c.DatabaseURL); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				add("database_url (its password)", p)
			}
		}
	}
	return out
}

// HoldsSecret returns the first of secrets that v equals or contains
// (secrets shorter than MinSecretLen only when equal).
func HoldsSecret(v string, secrets []Secret) (Secret, bool) {
	for _, s := range secrets {
		if v == s.Value || (len(s.Value) >= MinSecretLen && strings.Contains(v, s.Value)) {
			return s, true
		}
	}
	return Secret{}, false
}
