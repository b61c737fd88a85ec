package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
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
// come through Socket Mode (surfaces.slack.app_token) or, with
// surfaces.slack.signing_secret, to serve's Events API endpoint
// (/webhooks/slack/events).
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
	// Repos are the repositories watched: "owner/name", or a mapping
	// {repo: owner/name, spec: …, labels: […], mention: …} whose keys
	// override these defaults for that repository (its spec is the one
	// whose workdir is that repository's checkout). Default:
	// surfaces.github.repo.
	Repos []TriggerRepo `yaml:"repos"`
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

// TriggerRepo is an entry of triggers.github.repos: a repository, and
// what it sets apart from triggers.github (empty: the default; Labels nil:
// the default, an empty list: none).
type TriggerRepo struct {
	Repo    string   `yaml:"repo"`
	Spec    string   `yaml:"spec"`
	Labels  []string `yaml:"labels"`
	Mention string   `yaml:"mention"`
}

// triggerRepoKeys is TriggerRepo decoded key by key (unknown keys are
// errors).
type triggerRepoKeys TriggerRepo

// DecodeNode implements yamlfile.NodeDecoder: "owner/name", or a mapping
// of repo, spec, labels and mention.
func (r *TriggerRepo) DecodeNode(d *yamlfile.Decoder, n *yaml.Node, path string) {
	if d.Lines != nil {
		d.Lines[path] = n.Line + d.Offset
	}
	switch n.Kind {
	case yaml.ScalarNode:
		var s string
		if err := n.Decode(&s); err != nil {
			d.Mismatch(n, "owner/name or a mapping with repo", path)
			return
		}
		r.Repo = s
	case yaml.MappingNode:
		d.Decode(n, (*triggerRepoKeys)(r), path)
		if strings.TrimSpace(r.Repo) == "" {
			d.Errorf(n.Line, yamlfile.JoinKey(path, "repo"), "required: the repository, owner/name")
		}
	default:
		d.Mismatch(n, "owner/name or a mapping with repo", path)
	}
}

// TriggerRepos are the repositories triggers.github watches: its repos,
// else surfaces.github.repo.
func (c *Config) TriggerRepos() []string {
	var out []string
	for _, r := range c.Triggers.GitHub.Repos {
		out = append(out, r.Repo)
	}
	if len(out) > 0 {
		return out
	}
	if r := c.Surfaces.GitHub.Repo; r != "" {
		return []string{r}
	}
	return nil
}

// TriggerRepoSettings is what triggers.github gives one repository, its
// entry's keys over the defaults: Repo as configured, and Key the entry's
// key ("triggers.github.repos[1]"; "" for surfaces.github.repo).
func (c *Config) TriggerRepoSettings(repo string) (s TriggerRepo, key string) {
	g := c.Triggers.GitHub
	s = TriggerRepo{Repo: repo, Spec: g.Spec, Labels: g.Labels, Mention: strings.TrimSpace(g.Mention)}
	if s.Mention == "" {
		s.Mention = DefaultTriggerMention
	}
	for i, r := range g.Repos {
		if !strings.EqualFold(r.Repo, repo) {
			continue
		}
		s.Repo, key = r.Repo, fmt.Sprintf("triggers.github.repos[%d]", i)
		if r.Spec != "" {
			s.Spec = r.Spec
		}
		if r.Labels != nil {
			s.Labels = r.Labels
		}
		if m := strings.TrimSpace(r.Mention); m != "" {
			s.Mention = m
		}
		break
	}
	return s, key
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
	seen := map[string]int{}
	for i, r := range t.Repos {
		key := fmt.Sprintf("triggers.github.repos[%d]", i)
		if r.Repo == "" {
			continue // a mapping without repo: said when decoding
		}
		owner, name, ok := strings.Cut(r.Repo, "/")
		if !ok || owner == "" || name == "" || strings.ContainsAny(name, "/ ") || strings.ContainsAny(owner, " ") {
			add(key, "want owner/name, got %q", r.Repo)
			continue
		}
		if j, dup := seen[strings.ToLower(r.Repo)]; dup {
			add(key, "%s is listed twice (first at triggers.github.repos[%d])", r.Repo, j)
		}
		seen[strings.ToLower(r.Repo)] = i
		if r.Spec != "" && (strings.TrimSpace(r.Spec) == "" || strings.ContainsAny(r.Spec, `/\`)) {
			add(key+".spec", "want the name of a spec in specs.dir, got %q", r.Spec)
		}
		if r.Mention != "" && strings.ContainsAny(strings.TrimSpace(r.Mention), " \t\r\n") {
			add(key+".mention", "want one word such as @orchestrator, got %q", r.Mention)
		}
		for j, l := range r.Labels {
			if strings.TrimSpace(l) == "" {
				add(fmt.Sprintf("%s.labels[%d]", key, j), "must not be empty")
			}
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
	if sl := c.Surfaces.Slack; !sl.Enabled || (strings.TrimSpace(sl.AppToken) == "" && strings.TrimSpace(sl.SigningSecret) == "") {
		add("triggers.slack.enabled", "needs surfaces.slack enabled with an app_token or a signing_secret: mentions come through Socket Mode or to serve's /webhooks/slack/events, and the run asks in the channel")
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
