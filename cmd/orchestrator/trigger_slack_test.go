package main

import (
	"testing"

	"github.com/orchestrator-dev/orchestrator/surfaces/slack"
)

func TestParseSlackMention(t *testing.T) {
	t.Parallel()
	bot := "<@U0FAKEB0T1>"
	for _, c := range []struct {
		text, mention, spec, task string
		ok                        bool
	}{
		{bot + " run login add a page", "", "login", "add a page", true},
		{bot + " fix the flaky test", "", "", "fix the flaky test", true},
		{"please " + bot + " run login", "", "", "", false},
		{bot + " !deploy run web", "!deploy", "web", "", true},
		{bot + " run web", "!deploy", "", "", false},
	} {
		spec, task, ok := parseSlackMention(slack.Mention{Text: c.text, BotMention: bot}, c.mention)
		if spec != c.spec || task != c.task || ok != c.ok {
			t.Errorf("parseSlackMention(%q, %q) = %q, %q, %v; want %q, %q, %v", c.text, c.mention, spec, task, ok, c.spec, c.task, c.ok)
		}
	}
}
