package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidate_Triggers(t *testing.T) {
	t.Parallel()
	in := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    repos: [acme/webapp, nope]\n    mention: \"\"\n    labels: [\"\"]\n    spec: a/b\n    max_runs_per_hour: 0\n"
	cfg, err := ParseEnv(strings.NewReader(in), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`t.yaml:9: triggers.github.repos[1]: want owner/name, got "nope"`,
		`t.yaml:10: triggers.github.mention: want one word`,
		`t.yaml:11: triggers.github.labels[0]: must not be empty`,
		`t.yaml:12: triggers.github.spec: want the name of a spec`,
		`t.yaml:13: triggers.github.max_runs_per_hour: must be at least 1, got 0`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}

	ok := "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: acme/webapp\ntriggers:\n  github:\n    enabled: true\n    labels: [orchestrator]\n"
	cfg, err = ParseEnv(strings.NewReader(ok), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults with surfaces.github.repo: %v", err)
	}
	g := cfg.Triggers.GitHub
	if g.Mention != "@orchestrator" || g.Spec != "issue" || g.MaxRunsPerHour != 10 || !g.Closes || !g.Review {
		t.Errorf("defaults: %+v", g)
	}
	if r := cfg.TriggerRepos(); len(r) != 1 || r[0] != "acme/webapp" {
		t.Errorf("TriggerRepos = %v, want surfaces.github.repo", r)
	}

	off := "triggers:\n  github:\n    enabled: true\n"
	cfg, err = ParseEnv(strings.NewReader(off), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(Errors(cfg.Validate())); !strings.Contains(got, "t.yaml:3: triggers.github.enabled: needs surfaces.github enabled") {
		t.Errorf("without the surface: %s", got)
	}
}

func TestValidate_SlackTriggers(t *testing.T) {
	t.Parallel()
	in := "triggers:\n  slack:\n    enabled: true\n    mention: \"two words\"\n    spec: a/b\n    max_runs_per_hour: 0\n"
	cfg, err := ParseEnv(strings.NewReader(in), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{
		`t.yaml:3: triggers.slack.enabled: needs surfaces.slack enabled with an app_token`,
		`t.yaml:4: triggers.slack.mention: want one word`,
		`t.yaml:5: triggers.slack.spec: want the name of a spec`,
		`t.yaml:6: triggers.slack.max_runs_per_hour: must be at least 1, got 0`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}

	ok := "surfaces:\n  slack:\n    enabled: true\n    bot_token: xoxb-1\n    app_token: xapp-1\n    channel: C0FAKE0001\n    allow_users: [U0ALICE001]\ntriggers:\n  slack:\n    enabled: true\n"
	cfg, err = ParseEnv(strings.NewReader(ok), "t.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults with surfaces.slack: %v", err)
	}
	if s := cfg.Triggers.Slack; s.Mention != "" || s.Spec != "slack" || s.MaxRunsPerHour != 10 {
		t.Errorf("defaults: %+v", s)
	}
}
