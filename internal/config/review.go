package config

import (
	"strings"
	"unicode"
)

// DefaultMention is triggers.github.mention's default.
const DefaultMention = "@orchestrator"

// ReviewTrigger is the review loop's part of triggers.github: whether
// comments on a run's pull request resume the run (on when the triggers
// are enabled and review is), and the mention that starts such a comment.
func (c *Config) ReviewTrigger() (on bool, mention string) {
	g := c.Triggers.GitHub
	mention = strings.TrimSpace(g.Mention)
	if mention == "" {
		mention = DefaultMention
	}
	return g.Enabled && g.Review, mention
}

// validateReview checks the review loop's keys of triggers.github.
func (c *Config) validateReview(add func(key, format string, args ...any)) {
	g := c.Triggers.GitHub
	m := strings.TrimSpace(g.Mention)
	if m == "" {
		if g.Mention != "" {
			add("triggers.github.mention", "must not be blank")
		}
		return
	}
	if !strings.HasPrefix(m, "@") || len(m) < 2 || strings.IndexFunc(m, unicode.IsSpace) >= 0 {
		add("triggers.github.mention", "want one @word that starts a comment (like %q), got %q", DefaultMention, g.Mention)
	}
}
