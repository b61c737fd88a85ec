package specs

import "github.com/orchestrator-dev/orchestrator/internal/config"

// Notify is a spec's notify: section: where its runs' events go (the
// configuration's notify keys; a list set here replaces the
// configuration's for the spec's runs). The secret stays in the
// configuration.
type Notify struct {
	config.NotifyRoute `yaml:",inline"`
}

// Check implements the check of a section (sectionChecker).
func (n *Notify) Check(c *config.Checker) { n.NotifyRoute.Check(c) }

// PauseAfter is a spec's pause_after_failures: its schedule pauses once
// that many of its runs failed in a row; 0 never pauses it. Not set: the
// configuration's serve.pause_after_failures.
type PauseAfter int

// Check implements the check of a section (sectionChecker).
func (p *PauseAfter) Check(c *config.Checker) {
	if *p < 0 {
		c.Add("", "must not be negative (0 never pauses)")
	}
}
