package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/delivery"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// Runs started from GitHub issues (triggers.github): the GitHub client
// reads the events (surfaces/github/triggers.go); issueTriggers makes
// their runs. A run's settings come only from the configuration and the
// spec folder; the issue gives its task, quoted (questions.FormatIssue).

// issueOrigin is the issue a run was started from, kept in its options:
// its questions are asked there, and its pull request closes it.
type issueOrigin struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	Closes bool   `json:"closes,omitempty"`
}

// triggerSpecRE is a spec name a comment may give: a name, never a path.
var triggerSpecRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Outcomes of triggering events recorded without a run.
const (
	triggerUnknownSpec   = "unknown spec"
	triggerWrongCheckout = "wrong checkout"
)

// issueTriggers is the github.TriggerHandler of serve.
type issueTriggers struct {
	m  *Main
	st *store.Store
	r  *runner.Runner
}

var _ github.TriggerHandler = (*issueTriggers)(nil)

// startTriggers makes the GitHub client start runs from issues when
// triggers.github is enabled: by webhook when surfaces.github has a
// webhook_secret, and by polling while leading says this instance leads
// (with a webhook too, as its safety net: an event whose handling failed
// after the webhook's 202 is read again; its key makes both one run).
func (m *Main) startTriggers(ctx context.Context, st *store.Store, r *runner.Runner, leading func() bool) error {
	tc := m.Config.Triggers.GitHub
	if !tc.Enabled {
		return nil
	}
	if m.github == nil {
		return configError(errors.New("triggers.github is enabled but the github surface is not built: enable surfaces.github"))
	}
	gc := m.Config.Surfaces.GitHub
	h := &issueTriggers{m: m, st: st, r: r}
	if _, data, known, err := h.findSpec(tc.Spec); err != nil {
		return configError(fmt.Errorf("triggers.github.spec: %w", err))
	} else if data == nil {
		m.Logger.Warn("triggers.github.spec names no spec of specs.dir: labels and free-text mentions get a reply and start nothing until it exists",
			"spec", tc.Spec, "dir", m.Config.Specs.Dir, "known", strings.Join(known, ", "))
	}
	if err := triggerRepoSpecProblems(m.Config, m.Config.Source(), h.knownSpecs()); err != nil {
		return configError(err)
	}
	per := map[string]github.RepoTriggers{}
	for _, repo := range m.Config.TriggerRepos() {
		s, _ := m.Config.TriggerRepoSettings(repo)
		per[repo] = github.RepoTriggers{Mention: s.Mention, Labels: s.Labels}
	}
	return m.github.StartTriggers(ctx, github.TriggerConfig{
		Repos:     m.Config.TriggerRepos(),
		Mention:   tc.Mention,
		Labels:    tc.Labels,
		PerRepo:   per,
		Allow:     gc.Allow,
		AllowOnly: gc.AllowOnly,
		Handler:   h,
		Poll:      true,
		Leading:   leading,
	})
}

// Refuse implements github.TriggerHandler.
func (h *issueTriggers) Refuse(ctx context.Context, t github.IssueTrigger) (bool, error) {
	return h.st.RecordTrigger(ctx, store.Trigger{Key: t.Key, Repo: strings.ToLower(t.Repo), Origin: t.Origin(), Outcome: store.TriggerRefused})
}

// Start implements github.TriggerHandler: it makes the queued run of t,
// recorded with t in one transaction, for any serve instance to take.
func (h *issueTriggers) Start(ctx context.Context, t github.IssueTrigger) (github.TriggerStart, error) {
	tc := h.m.Config.Triggers.GitHub
	ev := store.Trigger{Key: t.Key, Repo: strings.ToLower(t.Repo), Origin: t.Origin()}
	name := t.Spec
	if name == "" {
		rs, _ := h.m.Config.TriggerRepoSettings(t.Repo)
		name = rs.Spec // the repository's, else triggers.github.spec
	}
	sp, data, known, err := h.findSpec(name)
	if err != nil {
		return github.TriggerStart{}, err
	}
	if data == nil {
		ev.Outcome = triggerUnknownSpec
		first, err := h.st.RecordTrigger(ctx, ev)
		if err != nil || !first {
			return github.TriggerStart{}, err
		}
		list := "none"
		if len(known) > 0 {
			list = "`" + strings.Join(known, "`, `") + "`"
		}
		return github.TriggerStart{Reply: fmt.Sprintf("There is no spec named `%s` in the orchestrator's spec folder, so no run was started. Known specs: %s.",
			strings.ReplaceAll(questions.Clean(name), "`", "'"), list)}, nil
	}
	n, opts := specRun(sp, data)
	n.Prompt = issuePrompt(sp.Body, t)
	n.Title = truncateRunes(fmt.Sprintf("%s#%d: %s", t.Repo, t.Issue, strings.Join(strings.Fields(questions.Clean(t.Title)), " ")), 72)
	opts.Issue = &issueOrigin{Repo: t.Repo, Number: t.Issue, Closes: tc.Closes}
	n, err = h.m.finishRun(n, opts, runFlags{})
	if err != nil {
		return github.TriggerStart{}, err
	}
	if !slices.Contains(n.Surfaces, "github") {
		n.Surfaces = append(n.Surfaces, "github") // its questions are asked in the issue
	}
	if refused, reply, err := h.checkCheckout(ctx, ev, sp, opts, n.WorkDir); refused || err != nil {
		return github.TriggerStart{Reply: reply}, err
	}
	n.Queued = true
	n.Trigger = &ev
	n.TriggerLimit = tc.MaxRunsPerHour
	run, err := h.r.Create(ctx, n)
	switch {
	case errors.Is(err, store.ErrTriggerTaken):
		return github.TriggerStart{}, nil
	case errors.Is(err, store.ErrTriggerLimit):
		return github.TriggerStart{Reply: fmt.Sprintf("This repository has started %d runs in the last hour, the most the orchestrator is configured for (triggers.github.max_runs_per_hour), so no run was started. Ask again later.", tc.MaxRunsPerHour)}, nil
	case err != nil:
		return github.TriggerStart{}, err
	}
	return github.TriggerStart{RunID: run.ID}, nil
}

// findSpec finds the spec of specs.dir named name (a name, never a path):
// nil data when there is none, with the names known.
func (h *issueTriggers) findSpec(name string) (specs.Spec, []byte, []string, error) {
	dir := h.m.Config.Specs.Dir
	list, _ := specs.LoadDir(dir) // the good ones: another file's problem does not hide this one
	var known []string
	for _, sp := range list {
		known = append(known, sp.Name)
	}
	if !triggerSpecRE.MatchString(name) {
		return specs.Spec{}, nil, known, nil
	}
	for _, sp := range list {
		if sp.Name != name {
			continue
		}
		p, err := filepath.Abs(sp.Path)
		if err != nil {
			return specs.Spec{}, nil, known, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return specs.Spec{}, nil, known, fmt.Errorf("read spec %s: %w", p, err)
		}
		sp, err := specs.Parse(p, data) // as read now
		if err != nil {
			return specs.Spec{}, nil, known, err
		}
		if err := bypassRefusal(h.m.Config, sp); err != nil {
			return specs.Spec{}, nil, known, err
		}
		return sp, data, known, nil
	}
	return specs.Spec{}, nil, known, nil
}

// checkCheckout refuses, with a reply for the issue, a run whose spec
// works in a checkout of another repository than the issue's: its work
// would go there (the run's delivery checks again before its first turn).
// The reply is "" when another call recorded the refusal already.
func (h *issueTriggers) checkCheckout(ctx context.Context, ev store.Trigger, sp specs.Spec, opts runOptions, workdir string) (refused bool, reply string, err error) {
	dopts, ok := h.m.deliveryOptions(&sp, opts)
	if !ok {
		return false, "", nil // not delivered through git: nothing is pushed
	}
	var re *delivery.RemoteRepoError
	if err := (delivery.Git{}).CheckRemoteRepo(ctx, workdir, dopts); !errors.As(err, &re) {
		return false, "", nil // a checkout of it, or a problem the run will report
	}
	h.m.Logger.Warn("a run asked in an issue was refused: its spec works in a checkout of another repository",
		"spec", sp.Name, "issue_repo", re.Want, "checkout", re.Checkout, "checkout_repo", re.Got)
	ev.Outcome = triggerWrongCheckout
	if first, err := h.st.RecordTrigger(ctx, ev); err != nil || !first {
		return true, "", err
	}
	got := "has no remote `" + re.Remote + "`"
	if re.Got != "" {
		got = "is a checkout of " + re.Got
	}
	// The reply names no folder of this machine.
	return true, fmt.Sprintf("The spec `%s` works in a folder that %s, not of %s, so no run was started: its work would go to another repository. "+
		"A maintainer can give %s a spec whose workdir is a checkout of it (triggers.github.repos: {repo: %s, spec: NAME}).",
		sp.Name, got, re.Want, re.Want, re.Want), nil
}

// knownSpecs are the names of the specs of specs.dir that load.
func (h *issueTriggers) knownSpecs() []string {
	_, _, known, _ := h.findSpec("")
	return known
}

// triggerRepoSpecProblems are the entries of triggers.github.repos whose
// spec is not one of known (the specs of specs.dir), at their file, line
// and key: a repository's spec is checked before serve starts, as its
// runs could start nothing else (the default, triggers.github.spec, may
// come later: its events get a reply until then).
func triggerRepoSpecProblems(cfg config.Config, file string, known []string) error {
	if !cfg.Triggers.GitHub.Enabled {
		return nil
	}
	var errs []error
	for i, r := range cfg.Triggers.GitHub.Repos {
		if r.Spec == "" || slices.Contains(known, r.Spec) {
			continue
		}
		list := "none"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		key := fmt.Sprintf("triggers.github.repos[%d].spec", i)
		errs = append(errs, &config.Error{File: file, Line: cfg.Line(key), Key: key,
			Err: fmt.Errorf("no spec named %q in specs.dir (known: %s)", r.Spec, list)})
	}
	return errors.Join(errs...)
}

// issuePrompt is the task of a run started from an issue: the spec's body,
// then the issue, quoted.
func issuePrompt(body string, t github.IssueTrigger) string {
	issue := questions.FormatIssue(questions.IssueText{Repo: t.Repo, Number: t.Issue, Title: t.Title, Body: t.Body,
		Author: t.Author, Comment: t.Comment, Label: t.Label}, 0)
	body = strings.TrimSpace(body)
	if body == "" {
		body = "Do the work the GitHub issue below asks for."
	}
	return body + "\n\n" + issue
}

// triggerIssueRef gives the github surface of a run started from an issue
// that issue's repository and number (over the spec's override, ref), so
// that its questions and progress go there.
func triggerIssueRef(run store.Run, ref *specs.SurfaceRef) *specs.SurfaceRef {
	o, err := decodeRunOptions(run)
	if err != nil || o.Issue == nil || o.Issue.Number <= 0 {
		return ref
	}
	g := &config.GitHub{}
	keys := []string{}
	if ref != nil {
		if v, ok := ref.Override.Value.(*config.GitHub); ok {
			c := *v
			g = &c
			keys = append(keys, ref.Override.Keys...)
		}
	}
	g.Repo, g.Issue = o.Issue.Repo, o.Issue.Number
	for _, k := range []string{"repo", "issue"} {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return &specs.SurfaceRef{Name: "github", Override: config.Override{Value: g, Keys: keys}}
}

// triggerCloses is what the pull request of a run started from an issue
// closes: "#N" in the issue's repository, else "owner/name#N"; "" for
// another run or when triggers.github.closes is off.
func triggerCloses(o runOptions, prRepo string) string {
	if o.Issue == nil || !o.Issue.Closes || o.Issue.Number <= 0 {
		return ""
	}
	if strings.EqualFold(o.Issue.Repo, prRepo) {
		return "#" + strconv.Itoa(o.Issue.Number)
	}
	return o.Issue.Repo + "#" + strconv.Itoa(o.Issue.Number)
}

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
