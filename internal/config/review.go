package config

import "strings"

// ReviewTrigger is the review loop's part of triggers.github: whether
// comments on a run's pull request resume the run (on when the triggers
// are enabled and review is), and the mention that starts such a comment.
func (c *Config) ReviewTrigger() (on bool, mention string) {
	g := c.Triggers.GitHub
	mention = strings.TrimSpace(g.Mention)
	if mention == "" {
		mention = DefaultTriggerMention
	}
	return g.Enabled && g.Review, mention
}
