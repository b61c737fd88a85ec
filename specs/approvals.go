package specs

import (
	"fmt"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/config"
)

// Approvals is a spec's approvals section: the policy for the model's tool
// calls (internal/approvals; docs/approvals.md "Approvals and the model's
// own questions"), rules in the CLI's own syntax. Each list set replaces the configuration's; a nil *Approvals in
// Sections means the section is absent.
//
//	approvals:
//	  allow: ["Bash(go test:*)"]     # answered at once: runs
//	  deny: ["Bash(git push:*)"]     # answered at once: refused, the model is told
//	  ask: ["Bash(rm:*)"]            # a person decides (also the default)
//	  approval_hold: 10m             # how long a live call waits; 0 parks at once
type Approvals struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	Ask   []string `yaml:"ask"`
	// Hold is approval_hold; nil when not set.
	Hold *config.Duration `yaml:"approval_hold"`
}

// Check implements the check of a section: every rule parses, the hold is
// not negative.
func (a *Approvals) Check(c *config.Checker) {
	for _, l := range []struct {
		key   string
		rules []string
	}{{"allow", a.Allow}, {"deny", a.Deny}, {"ask", a.Ask}} {
		for i, r := range l.rules {
			if err := approvals.Validate(r); err != nil {
				c.Add(fmt.Sprintf("%s[%d]", l.key, i), "%v", err)
			}
		}
	}
	if a.Hold != nil && *a.Hold < 0 {
		c.Add("approval_hold", "must not be negative, got %s", *a.Hold)
	}
}
