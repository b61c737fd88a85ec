package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidate_Slack checks that every bad key of surfaces.slack is named
// with its file and line, and that no token value is shown.
func TestValidate_Slack(t *testing.T) {
	t.Parallel()
	in := "surfaces:\n  slack:\n    enabled: true\n    bot_token: xapp-1-wrong-kind-of-token\n    app_token: \"\"\n" +
		"    channel: general\n    allow_users: [alice]\n    allow_groups: [U0123456789]\n    api_url: \"ftp://x\"\n    request_timeout: 0s\n"
	cfg, err := ParseEnv(strings.NewReader(in), "s.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`s.yaml:4: surfaces.slack.bot_token: want a bot token, which starts with "xoxb-"`,
		`s.yaml:5: surfaces.slack.app_token: required when the Slack surface is enabled, unless signing_secret is set`,
		`s.yaml:6: surfaces.slack.channel: want a Slack channel ID (C… or G…`,
		`s.yaml:7: surfaces.slack.allow_users[0]: want a Slack user ID (U…), got "alice"`,
		`s.yaml:8: surfaces.slack.allow_groups[0]: want a Slack user group ID (S…), got "U0123456789"`,
		`s.yaml:9: surfaces.slack.api_url: want an absolute http or https URL`,
		`s.yaml:10: surfaces.slack.request_timeout: must be above zero`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}
	if strings.Contains(got, "wrong-kind-of-token") {
		t.Errorf("a token value is shown: %s", got)
	}

	ok := "surfaces:\n  slack:\n    enabled: true\n    bot_token: xoxb-1-2-abc\n    app_token: xapp-1-A1-2-abc\n    channel: C0123456789\n    allow_groups: [S0123456789]\n"
	cfg, err = ParseEnv(strings.NewReader(ok), "s.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if errs := Errors(cfg.Validate()); len(errs) != 0 {
		t.Errorf("a good block: %v", errs)
	}
	// A signing secret instead of an app token: interactivity over HTTP.
	http := "surfaces:\n  slack:\n    enabled: true\n    bot_token: xoxb-1-2-abc\n    signing_secret: abcdef0123456789\n    channel: C0123456789\n    allow_users: [U0123456789]\n"
	cfg, err = ParseEnv(strings.NewReader(http), "s.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if errs := Errors(cfg.Validate()); len(errs) != 0 {
		t.Errorf("a block with a signing secret: %v", errs)
	}
	// Unknown keys are refused at their line.
	_, err = ParseEnv(strings.NewReader("surfaces:\n  slack:\n    chanel: C0123456789\n"), "s.yaml", env("HOME", "/h"))
	if err == nil || !strings.Contains(err.Error(), "s.yaml:3") || !strings.Contains(err.Error(), "chanel") {
		t.Errorf("unknown key: %v", err)
	}
}
