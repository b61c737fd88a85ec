package config

import (
	"strings"
	"testing"
)

// agent.env holding a secret of the configuration, by ${VAR} or by value,
// whatever the variable is called, is refused with the file and line; the
// value is never shown.
func TestAgentEnvWithAConfiguredSecretIsRefused(t *testing.T) {
	const tok = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
	const dbPass = "pg-pass-0123456789"
	in := "database_url: postgres://orch:" + dbPass + "@db.internal/orch\n" +
		"surfaces:\n  github:\n    enabled: true\n    repo: acme/app\n    token: ${GH_TOKEN}\n    webhook_secret: ${HOOK_SECRET}\n" +
		"agent:\n  env:\n" +
		"    X: ${GH_TOKEN}\n" + // line 10
		"    AUTH: \"Bearer ${GH_TOKEN}\"\n" +
		"    HOOKS: ${HOOK_SECRET}\n" +
		"    PGPASSWORD: " + dbPass + "\n" +
		"    FINE: hello\n"
	cfg, err := ParseEnv(strings.NewReader(in), "c.yaml", env("HOME", "/h", "XDG_STATE_HOME", "/s", "GH_TOKEN", tok, "HOOK_SECRET", "hook-secret-value"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("validate accepted agent.env holding the orchestrator's secrets")
	}
	for _, want := range []string{
		"c.yaml:10: agent.env.X: holds the value of surfaces.github.token",
		"c.yaml:11: agent.env.AUTH: holds the value of surfaces.github.token",
		"c.yaml:12: agent.env.HOOKS: holds the value of surfaces.github.webhook_secret",
		"c.yaml:13: agent.env.PGPASSWORD: holds the value of database_url (its password)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, secret := range []string{tok, dbPass, "hook-secret-value"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a secret")
		}
	}
	if strings.Contains(err.Error(), "FINE") {
		t.Errorf("FINE refused: %v", err)
	}
}

func TestSecretsListsEveryConfiguredSecret(t *testing.T) {
	cfg := DefaultEnv(env("HOME", "/h"))
	cfg.DatabaseURL = "postgres://u:p%40ss-word-1@h/db"
	cfg.Surfaces.GitHub.Token = "gh-token-value"
	cfg.Surfaces.GitHub.WebhookSecret = "hook-value"
	cfg.Surfaces.Discord.Token = "discord-value"
	cfg.Git.Token = "git-token-value"
	cfg.Serve.Web.ProxySecret = "proxy-secret-value"
	cfg.Surfaces.Slack.BotToken, cfg.Surfaces.Slack.AppToken, cfg.Surfaces.Slack.SigningSecret = "xoxb-bot-value", "xapp-app-value", "signing-value"
	got := map[string]string{}
	for _, s := range cfg.Secrets() {
		got[s.Key] = s.Value
	}
	want := map[string]string{
		"surfaces.github.token": "gh-token-value", "surfaces.github.webhook_secret": "hook-value",
		"surfaces.discord.token": "discord-value", "git.token": "git-token-value", "serve.web.proxy_secret": "proxy-secret-value",
		"database_url": cfg.DatabaseURL, "database_url (its password)": "p@ss-word-1",
		"surfaces.slack.bot_token": "xoxb-bot-value", "surfaces.slack.app_token": "xapp-app-value", "surfaces.slack.signing_secret": "signing-value",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Secrets()[%s] = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := HoldsSecret("x", cfg.Secrets()); ok {
		t.Error("HoldsSecret matched an unrelated short value")
	}
}
