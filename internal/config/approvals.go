package config

import (
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
)

// DefaultApprovalHold is approvals.approval_hold's default.
const DefaultApprovalHold = Duration(approvals.DefaultHold)

// Approvals is the policy for the model's tool calls (docs/approvals.md
// "Approvals and the model's own questions"), rules in the agent CLI's own syntax ("Bash(git push:*)"). A spec's
// approvals section replaces each list it sets.
type Approvals struct {
	// Allow: calls answered at once, allowed.
	Allow []string `yaml:"allow"`
	// Deny: calls answered at once, refused (the model is told).
	Deny []string `yaml:"deny"`
	// Ask: calls a person decides; also every call no rule names.
	Ask []string `yaml:"ask"`
	// Hold is how long a live call waits for a person before the run parks
	// (no process while it waits); 0 parks at once. Default: 10m.
	Hold Duration `yaml:"approval_hold"`
}

func (c *Config) validateApprovals(add func(key, format string, args ...any)) {
	a := c.Approvals
	for _, l := range []struct {
		key   string
		rules []string
	}{{"approvals.allow", a.Allow}, {"approvals.deny", a.Deny}, {"approvals.ask", a.Ask}} {
		for i, r := range l.rules {
			if err := approvals.Validate(r); err != nil {
				add(fmt.Sprintf("%s[%d]", l.key, i), "%v", err)
			}
		}
	}
	if a.Hold < 0 {
		add("approvals.approval_hold", "must not be negative, got %s", a.Hold)
	}
}
