package config

import (
	"fmt"
	"strings"
)

// Triggers says which events outside the orchestrator start runs.
type Triggers struct {
	GitHub GitHubTriggers `yaml:"github"`
	Slack  SlackTriggers  `yaml:"slack"`
}

// SlackTriggers starts runs from mentions of the bot in surfaces.slack's
// channel, by someone allowed to answer there (allow_users, allow_groups):
// "@orchestrator run SPEC [text]" runs that spec of specs.dir, any other
// text runs Spec with it. The run lives in the mention's thread. Events
// come through Socket Mode (surfaces.slack.app_token).
type SlackTriggers struct {
	Enabled bool `yaml:"enabled"`
	// Mention starts a message that starts a run (after the bot's
	// mention, which Slack requires). Default: empty, the bot's own
	// mention (<@U…>).
	Mention string `yaml:"mention"`
	// Spec is the spec of specs.dir a run started by a mention uses,
	// unless the message names another. Default: slack.
	Spec string `yaml:"spec"`
	// MaxRunsPerHour bounds the runs started from the channel in an hour;
	// more are refused with a reply. Default: 10.
	MaxRunsPerHour int `yaml:"max_runs_per_hour"`
}

// DefaultSlackTriggerSpec is triggers.slack.spec's default.
const DefaultSlackTriggerSpec = "slack"

// GitHubTriggers starts runs from GitHub issues: a comment that starts
// with Mention, or one of Labels put on an issue, by someone allowed to
// answer questions there (write permission, or surfaces.github.allow).
// The run's settings come from the spec named Spec in specs.dir (or the
// one the comment names: "@orchestrator run SPEC"), never from the
// repository; the issue supplies the task, as quoted data.
type GitHubTriggers struct {
	Enabled bool `yaml:"enabled"`
	// Repos are the repositories watched, "owner/name". Default:
	// surfaces.github.repo.
	Repos []string `yaml:"repos"`
	// Mention starts a comment that starts a run. Default: @orchestrator.
	Mention string `yaml:"mention"`
	// Labels: an issue that gets one of them starts a run. Default: none.
	Labels []string `yaml:"labels"`
	// Spec is the spec of specs.dir whose settings and body a run started
	// from an issue uses, unless the comment names another. Default: issue.
	Spec string `yaml:"spec"`
	// Review: comments on a run's pull request resume that run.
	Review bool `yaml:"review"`
	// MaxRunsPerHour bounds the runs started per repository in an hour;
	// more are refused with a reply. Default: 10.
	MaxRunsPerHour int `yaml:"max_runs_per_hour"`
	// Closes makes the run's pull request say "Closes #N" of the issue
	// that started it. Default: true.
	Closes bool `yaml:"closes"`
}

// GitHub triggers' defaults.
const (
	DefaultTriggerMention        = "@orchestrator"
	DefaultTriggerSpec           = "issue"
	DefaultTriggerMaxRunsPerHour = 10
)

// defaultTriggers are the defaults of the triggers section.
func defaultTriggers() Triggers {
	return Triggers{GitHub: GitHubTriggers{Mention: DefaultTriggerMention, Spec: DefaultTriggerSpec,
		Review: true, MaxRunsPerHour: DefaultTriggerMaxRunsPerHour, Closes: true},
		Slack: SlackTriggers{Spec: DefaultSlackTriggerSpec, MaxRunsPerHour: DefaultTriggerMaxRunsPerHour}}
}

// TriggerRepos are the repositories triggers.github watches: its repos,
// else surfaces.github.repo.
func (c *Config) TriggerRepos() []string {
	if len(c.Triggers.GitHub.Repos) > 0 {
		return c.Triggers.GitHub.Repos
	}
	if r := c.Surfaces.GitHub.Repo; r != "" {
		return []string{r}
	}
	return nil
}

// validateTriggers checks the triggers section.
func (c *Config) validateTriggers(add func(key, format string, args ...any)) {
	c.validateSlackTriggers(add)
	t := c.Triggers.GitHub
	if !t.Enabled {
		return
	}
	if !c.Surfaces.GitHub.Enabled {
		add("triggers.github.enabled", "needs surfaces.github enabled: a run started from an issue asks its questions there, with its credentials")
	}
	for i, r := range t.Repos {
		owner, name, ok := strings.Cut(r, "/")
		if !ok || owner == "" || name == "" || strings.ContainsAny(name, "/ ") || strings.ContainsAny(owner, " ") {
			add(fmt.Sprintf("triggers.github.repos[%d]", i), "want owner/name, got %q", r)
		}
	}
	if len(c.TriggerRepos()) == 0 {
		add("triggers.github.repos", "required (or surfaces.github.repo): which repositories' issues start runs")
	}
	m := strings.TrimSpace(t.Mention)
	if m == "" || strings.ContainsAny(m, " \t\r\n") {
		add("triggers.github.mention", "want one word such as @orchestrator, got %q", t.Mention)
	}
	for i, l := range t.Labels {
		if strings.TrimSpace(l) == "" {
			add(fmt.Sprintf("triggers.github.labels[%d]", i), "must not be empty")
		}
	}
	if strings.TrimSpace(t.Spec) == "" || strings.ContainsAny(t.Spec, `/\`) {
		add("triggers.github.spec", "want the name of a spec in specs.dir, got %q", t.Spec)
	}
	if t.MaxRunsPerHour < 1 {
		add("triggers.github.max_runs_per_hour", "must be at least 1, got %d", t.MaxRunsPerHour)
	}
}

// validateSlackTriggers checks triggers.slack.
func (c *Config) validateSlackTriggers(add func(key, format string, args ...any)) {
	t := c.Triggers.Slack
	if !t.Enabled {
		return
	}
	if sl := c.Surfaces.Slack; !sl.Enabled || sl.AppToken == "" {
		add("triggers.slack.enabled", "needs surfaces.slack enabled with an app_token: mentions come through Socket Mode, and the run asks in the channel")
	}
	if strings.ContainsAny(t.Mention, " \t\r\n") {
		add("triggers.slack.mention", "want one word such as !orchestrator, or empty for the bot's mention, got %q", t.Mention)
	}
	if strings.TrimSpace(t.Spec) == "" || strings.ContainsAny(t.Spec, `/\`) {
		add("triggers.slack.spec", "want the name of a spec in specs.dir, got %q", t.Spec)
	}
	if t.MaxRunsPerHour < 1 {
		add("triggers.slack.max_runs_per_hour", "must be at least 1, got %d", t.MaxRunsPerHour)
	}
}
