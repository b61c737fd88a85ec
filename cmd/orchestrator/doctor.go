package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

func (m *Main) newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration against the real services",
		Long: `doctor checks what the configuration names, against the real services:

  - the agent CLI is found and its version is in the tested range
    (` + executor.TestedCLIRange() + `; older is a problem, newer a warning);
  - the GitHub token (or App) is valid and may do what the configuration
    needs: issues (questions on GitHub), pull requests and contents
    (delivery with pull requests); a configured webhook is registered;
  - the Discord bot can see its channel and post in it;
  - the Slack bot can post in its channel, and Socket Mode opens;
  - the database is reachable and its schema up to date (a new SQLite
    store is created, as any command would).

Each problem says what to change. It exits with 1 when there is any
problem; warnings alone exit 0.`,
		Args:        cobra.NoArgs,
		Annotations: noSurfacesAnnotation(), // it reports the surfaces' problems itself
		RunE:        func(cmd *cobra.Command, args []string) error { return m.runDoctor(cmd.Context()) },
	}
}

// doctor is one run of `orchestrator doctor`: it prints each check's
// outcome as it goes and counts the problems.
type doctor struct {
	w        io.Writer
	hc       *http.Client
	problems int
}

func (d *doctor) ok(what, format string, args ...any) {
	fmt.Fprintf(d.w, "ok       %s: %s\n", what, fmt.Sprintf(format, args...))
}

func (d *doctor) warn(what, format string, args ...any) {
	fmt.Fprintf(d.w, "warning  %s: %s\n", what, fmt.Sprintf(format, args...))
}

func (d *doctor) fail(what, format string, args ...any) {
	d.problems++
	fmt.Fprintf(d.w, "PROBLEM  %s: %s\n", what, fmt.Sprintf(format, args...))
}

// doctorTimeout bounds each request doctor makes.
const doctorTimeout = 30 * time.Second

func (m *Main) runDoctor(ctx context.Context) error {
	d := &doctor{w: m.Stdout, hc: &http.Client{Timeout: doctorTimeout}}
	where := m.ConfigFile
	if where == "" {
		where = "(defaults)"
	}
	fmt.Fprintf(m.Stdout, "config %s\n", where)
	for _, p := range m.surfaceProblems {
		d.fail("config", "%v", p)
	}
	m.doctorCLI(ctx, d)
	m.doctorGitHub(ctx, d)
	m.doctorDiscord(ctx, d)
	m.doctorSlack(ctx, d)
	m.doctorStore(ctx, d)
	if d.problems == 0 {
		return nil
	}
	word := "problems"
	if d.problems == 1 {
		word = "problem"
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("doctor: %d %s found", d.problems, word)}
}

// agentEnv is the environment the agent CLI's --version runs with: this
// process's, with agent.env's PATH when it sets one.
func (m *Main) agentEnv() []string {
	env := os.Environ()
	if p, ok := m.Config.Agent.Env["PATH"]; ok {
		env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }), "PATH="+p)
	}
	return env
}

// agentPath finds agent.command as a run does.
func (m *Main) agentPath() (string, error) {
	name := strings.TrimSpace(m.Config.Agent.Command)
	if strings.ContainsRune(name, filepath.Separator) {
		name = m.path(name)
	}
	var env []string
	if p, ok := m.Config.Agent.Env["PATH"]; ok {
		env = []string{"PATH=" + p}
	}
	return executor.LookCommand(name, env)
}

func (m *Main) doctorCLI(ctx context.Context, d *doctor) {
	const what = "agent CLI"
	if h := m.Config.Agent.Harness; h != "" && h != "claude" {
		d.ok(what, "agent.harness is %s: the Claude Code version range is not checked", h)
		return
	}
	path, err := m.agentPath()
	if err != nil {
		d.fail(what, "agent.command %q is not found (%v): install Claude Code %s (npm install -g @anthropic-ai/claude-code@%s) or set agent.command to its path",
			m.Config.Agent.Command, err, executor.TestedCLINewest, executor.TestedCLINewest)
		return
	}
	v, err := executor.ReadCLIVersion(ctx, path, m.agentEnv())
	if err != nil {
		d.fail(what, "%v: check that agent.command is Claude Code (tested: %s)", err, executor.TestedCLIRange())
		return
	}
	m.rememberCLIVersion(path, v)
	switch lo, _ := executor.ParseCLIVersion(executor.TestedCLIOldest); {
	case v.Tested():
		d.ok(what, "%s is Claude Code %s (tested: %s)", path, v, executor.TestedCLIRange())
	case v.Compare(lo) < 0:
		d.fail(what, "%s is Claude Code %s, older than the tested versions %s: install %s (npm install -g @anthropic-ai/claude-code@%s)",
			path, v, executor.TestedCLIRange(), executor.TestedCLINewest, executor.TestedCLINewest)
	default:
		d.warn(what, "%s is Claude Code %s, newer than the tested versions %s: it may work; if runs misbehave, install %s (npm install -g @anthropic-ai/claude-code@%s)",
			path, v, executor.TestedCLIRange(), executor.TestedCLINewest, executor.TestedCLINewest)
	}
}

// cliVersionsFile, in the state directory, remembers the version of each
// agent CLI binary already checked (by path, size and modification time),
// so that runs check a binary once, not at every start.
const cliVersionsFile = "cli-versions.json"

type cliVersionEntry struct {
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Version string    `json:"version"`
}

// binaryKey is what identifies a binary's build: its resolved path, size
// and modification time.
func binaryKey(path string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(real)
	return real, fi, err
}

func (m *Main) readCLIVersions() map[string]cliVersionEntry {
	out := map[string]cliVersionEntry{}
	if m.Config.StateDir == "" {
		return out
	}
	b, err := os.ReadFile(filepath.Join(m.Config.StateDir, cliVersionsFile))
	if err == nil {
		json.Unmarshal(b, &out) // a damaged file is checked again
	}
	return out
}

// rememberCLIVersion records v as the version of the binary at path.
func (m *Main) rememberCLIVersion(path string, v executor.CLIVersion) {
	key, fi, err := binaryKey(path)
	if err != nil || m.Config.StateDir == "" {
		return
	}
	all := m.readCLIVersions()
	all[key] = cliVersionEntry{Size: fi.Size(), ModTime: fi.ModTime().UTC(), Version: v.String()}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil || os.MkdirAll(m.Config.StateDir, 0o700) != nil {
		return
	}
	if err := writeFileAtomic(filepath.Join(m.Config.StateDir, cliVersionsFile), string(b)+"\n"); err != nil {
		m.Logger.Debug("agent CLI version: not remembered", "err", err)
	}
}

// checkCLIVersion is the check every run makes of the agent CLI: once per
// binary (cliVersionsFile), a warning in the log when its version is
// outside the tested range or cannot be read. It never stops a run.
func (m *Main) checkCLIVersion(c executor.Config) {
	if c.Harness != "" && c.Harness != "claude" {
		return
	}
	var env []string
	if p, ok := c.Env["PATH"]; ok {
		env = []string{"PATH=" + p}
	}
	path, err := executor.LookCommand(c.Command, env)
	if err != nil {
		return // the run says it, failing
	}
	key, fi, err := binaryKey(path)
	if err != nil {
		return
	}
	var v executor.CLIVersion
	if e, ok := m.readCLIVersions()[key]; ok && e.Size == fi.Size() && e.ModTime.Equal(fi.ModTime().UTC()) {
		if v, err = executor.ParseCLIVersion(e.Version); err != nil {
			return
		}
	} else {
		v, err = executor.ReadCLIVersion(context.Background(), path, m.agentEnv())
		if err != nil {
			m.Logger.Warn("agent CLI version unknown; the tested versions are "+executor.TestedCLIRange(), "command", path, "err", err)
			return
		}
		m.rememberCLIVersion(path, v)
	}
	if !v.Tested() {
		m.Logger.Warn("agent CLI version is not tested: install Claude Code "+executor.TestedCLINewest+" (tested: "+executor.TestedCLIRange()+")",
			"command", path, "version", v.String())
	}
}

// ghNeeds is what the configuration does on GitHub.
type ghNeeds struct {
	questions bool // the GitHub surface: issues
	pulls     bool // delivery opens pull requests
	push      bool // delivery pushes over HTTPS with the token: contents
	webhook   bool
}

func (n ghNeeds) what() string {
	var w []string
	if n.questions {
		w = append(w, "questions (issues)")
	}
	if n.pulls {
		w = append(w, "pull requests")
	}
	if n.push {
		w = append(w, "pushes (contents)")
	}
	return strings.Join(w, ", ")
}

func (m *Main) doctorGitHub(ctx context.Context, d *doctor) {
	gh := m.Config.Surfaces.GitHub
	g := m.Config.Git
	var n ghNeeds
	n.questions = gh.Enabled
	n.pulls = g.PullRequest.Enabled
	n.push = (g.Enabled || n.pulls) && (n.pulls || (g.Push != nil && *g.Push))
	n.webhook = gh.Enabled && gh.WebhookSecret != ""
	if !n.questions && !n.pulls && !n.push {
		return
	}
	const what = "github"
	repo := gh.Repo
	if repo == "" || (!n.questions && g.Repo != "") {
		repo = g.Repo
	}
	token, tokenKey := gh.Token, "surfaces.github.token"
	if !n.questions && g.Token != "" {
		token, tokenKey = g.Token, "git.token"
	}
	base := strings.TrimRight(gh.BaseURL, "/")
	if base == "" {
		base = "https://api.github.com"
	}
	c := &ghCall{hc: d.hc, base: base}
	switch {
	case gh.App.Configured() && token == "":
		if !m.doctorGitHubApp(ctx, d, c, n, repo) {
			return
		}
	case token == "":
		d.fail(what, "no token for %s: set surfaces.github.token (or git.token) to ${GITHUB_TOKEN} and export it", n.what())
		return
	default:
		c.auth = "Bearer " + token
		if !m.doctorGitHubToken(ctx, d, c, n, repo, tokenKey) {
			return
		}
	}
	if n.webhook && repo != "" {
		doctorWebhook(ctx, d, c, repo)
	}
}

// ghCall makes GitHub REST requests.
type ghCall struct {
	hc   *http.Client
	base string
	auth string            // the Authorization header
	rt   http.RoundTripper // instead of auth (an App's installation)
}

type ghResponse struct {
	status int
	header http.Header
	body   []byte
}

// message is GitHub's error message of r.
func (r ghResponse) message() string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(r.body, &e) == nil && e.Message != "" {
		return fmt.Sprintf("%d %s", r.status, e.Message)
	}
	return fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
}

func (c *ghCall) get(ctx context.Context, path string) (ghResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return ghResponse{}, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "orchestrator-doctor")
	hc := c.hc
	if c.rt != nil {
		cp := *c.hc
		cp.Transport = c.rt
		hc = &cp
	} else if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ghResponse{}, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ghResponse{}, fmt.Errorf("GET %s: %w", path, err)
	}
	return ghResponse{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// ghRepo is what doctor reads of GET /repos/{owner}/{repo}.
type ghRepo struct {
	Private     bool             `json:"private"`
	Permissions *map[string]bool `json:"permissions"`
}

// getRepo reads repo; false (and a problem reported) when it cannot.
func getRepo(ctx context.Context, d *doctor, c *ghCall, repo, fix string) (ghRepo, bool) {
	var r ghRepo
	resp, err := c.get(ctx, "/repos/"+repo)
	if err != nil {
		d.fail("github", "%v: check surfaces.github.base_url and the network", err)
		return r, false
	}
	if resp.status != http.StatusOK {
		d.fail("github", "repository %s: GET /repos/%s: %s: check the repository's name (surfaces.github.repo, git.repo) and %s",
			repo, repo, resp.message(), fix)
		return r, false
	}
	if err := json.Unmarshal(resp.body, &r); err != nil {
		d.fail("github", "repository %s: %v", repo, err)
		return r, false
	}
	return r, true
}

func (m *Main) doctorGitHubToken(ctx context.Context, d *doctor, c *ghCall, n ghNeeds, repo, key string) bool {
	const what = "github"
	resp, err := c.get(ctx, "/user")
	if err != nil {
		d.fail(what, "%v: check surfaces.github.base_url and the network", err)
		return false
	}
	installation := false
	switch {
	case resp.status == http.StatusUnauthorized:
		d.fail(what, "the token of %s is refused (%s): it is wrong, expired or revoked; make a new one and put it in the environment variable %s reads", key, resp.message(), key)
		return false
	case resp.status == http.StatusForbidden && n.questions:
		d.fail(what, "the token of %s belongs to no user (%s): an installation token (such as GitHub Actions' GITHUB_TOKEN) cannot ask questions; use a personal access token or the app: block", key, resp.message())
		return false
	case resp.status == http.StatusForbidden:
		installation = true
	case resp.status != http.StatusOK:
		d.fail(what, "GET /user: %s", resp.message())
		return false
	}
	login := ""
	if !installation {
		var u struct {
			Login string `json:"login"`
		}
		json.Unmarshal(resp.body, &u)
		login = u.Login
	}
	if repo == "" {
		d.warn(what, "the token works (user %s); no repository is configured, so its rights are checked when a spec names one", login)
		return false
	}
	r, ok := getRepo(ctx, d, c, repo, "that the token may read it")
	if !ok {
		return false
	}
	problems := d.problems
	// A classic token's responses name its scopes (X-OAuth-Scopes, empty
	// when it has none); a fine-grained token's ("github_pat_…") may carry
	// the header empty, and says nothing by it.
	scopes, classic := resp.header["X-Oauth-Scopes"]
	if classic && strings.TrimSpace(strings.Join(scopes, "")) == "" && strings.HasPrefix(strings.TrimPrefix(c.auth, "Bearer "), "github_pat_") {
		classic = false
	}
	if classic {
		// A classic token: its scopes. repo covers issues, pull requests,
		// contents and webhooks; public_repo the same on public
		// repositories.
		have := map[string]bool{}
		for _, s := range strings.Split(strings.Join(scopes, ","), ",") {
			if s = strings.TrimSpace(s); s != "" {
				have[s] = true
			}
		}
		if !have["repo"] && !(have["public_repo"] && !r.Private) {
			need := "repo"
			if !r.Private {
				need = "public_repo (or repo)"
			}
			d.fail(what, "the classic token of %s lacks the scope %s, which %s on %s need (it has: %s): add the scope at github.com/settings/tokens",
				key, need, n.what(), repo, noneIfEmpty(slices.Sorted(maps.Keys(have))))
		}
	} else {
		// A fine-grained token (or an installation's): try a read of
		// what each feature uses; GitHub names the permission a refused
		// one needs (X-Accepted-GitHub-Permissions).
		probes := []struct {
			need bool
			perm string // the permission's name on the token's settings page
			path string
		}{
			{n.questions, "Issues", "/repos/" + repo + "/issues?per_page=1"},
			{n.pulls, "Pull requests", "/repos/" + repo + "/pulls?per_page=1"},
			{n.push || n.pulls, "Contents", "/repos/" + repo + "/commits?per_page=1"},
		}
		for _, p := range probes {
			if !p.need {
				continue
			}
			pr, err := c.get(ctx, p.path)
			if err != nil {
				d.fail(what, "%v", err)
				continue
			}
			// 409: an empty repository has no commits, yet was readable.
			if pr.status == http.StatusOK || pr.status == http.StatusConflict {
				continue
			}
			if pr.status != http.StatusForbidden {
				d.warn(what, "could not check the token's %q permission on %s (GET %s: %s)", p.perm, repo, strings.Split(p.path, "?")[0], pr.message())
				continue
			}
			accepted := pr.header.Get("X-Accepted-GitHub-Permissions")
			if accepted == "" {
				accepted = "unknown"
			}
			d.fail(what, "the token of %s has no %q permission on %s (GET %s: %s; GitHub accepts %s): give the fine-grained token %q: Read and write on %s",
				key, p.perm, repo, strings.Split(p.path, "?")[0], pr.message(), accepted, p.perm, repo)
		}
	}
	if r.Permissions != nil && (n.push || n.pulls) && !(*r.Permissions)["push"] {
		d.fail(what, "the token's account %s cannot push to %s (its role there has no write access): give it write access to the repository, or use another token", noneIfEmpty([]string{login}), repo)
	}
	if d.problems == problems {
		kind := "fine-grained"
		if classic {
			kind = "classic"
		}
		d.ok(what, "the %s token of %s (user %s) may do what %s need on %s", kind, key, noneIfEmpty([]string{login}), n.what(), repo)
	}
	return d.problems == problems
}

func (m *Main) doctorGitHubApp(ctx context.Context, d *doctor, c *ghCall, n ghNeeds, repo string) bool {
	const what = "github"
	a := m.Config.Surfaces.GitHub.App
	key, err := os.ReadFile(a.PrivateKeyFile)
	if err != nil {
		d.fail(what, "surfaces.github.app.private_key_file: %v: download the app's private key and name it here", err)
		return false
	}
	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, a.ID, key)
	if err != nil {
		d.fail(what, "surfaces.github.app.private_key_file: %v: it must be the app's PEM private key", err)
		return false
	}
	atr.BaseURL = c.base
	appCall := &ghCall{hc: d.hc, base: c.base, rt: atr}
	resp, err := appCall.get(ctx, "/app/installations/"+strconv.FormatInt(a.InstallationID, 10))
	if err != nil {
		d.fail(what, "%v", err)
		return false
	}
	if resp.status != http.StatusOK {
		d.fail(what, "app %d, installation %d: %s: check surfaces.github.app.id, installation_id (the number in the installation's settings URL) and the private key", a.ID, a.InstallationID, resp.message())
		return false
	}
	var inst struct {
		Permissions map[string]string `json:"permissions"`
	}
	json.Unmarshal(resp.body, &inst)
	problems := d.problems
	need := []struct {
		on   bool
		perm string
		name string
	}{{n.questions, "issues", "Issues"}, {n.pulls, "pull_requests", "Pull requests"}, {n.push || n.pulls, "contents", "Contents"}}
	for _, p := range need {
		if p.on && inst.Permissions[p.perm] != "write" {
			got := inst.Permissions[p.perm]
			if got == "" {
				got = "none"
			}
			d.fail(what, "the app's installation %d has %s: %s, and %s need %s: write: give the app %q: Read and write (app settings, Permissions) and accept the change on the installation",
				a.InstallationID, p.perm, got, n.what(), p.perm, p.name)
		}
	}
	itr, err := ghinstallation.New(http.DefaultTransport, a.ID, a.InstallationID, key)
	if err != nil {
		d.fail(what, "%v", err)
		return false
	}
	itr.BaseURL = c.base
	c.rt = itr
	if repo != "" {
		if _, ok := getRepo(ctx, d, c, repo, "that the app is installed on it"); !ok {
			return false
		}
	}
	if d.problems == problems {
		d.ok(what, "the app %d (installation %d) may do what %s need%s", a.ID, a.InstallationID, n.what(), onRepo(repo))
	}
	return d.problems == problems
}

func onRepo(repo string) string {
	if repo == "" {
		return ""
	}
	return " on " + repo
}

// doctorWebhook checks that repo has an active webhook sending
// issue_comment events (GET /repos/{owner}/{repo}/hooks).
func doctorWebhook(ctx context.Context, d *doctor, c *ghCall, repo string) {
	const what = "github webhook"
	resp, err := c.get(ctx, "/repos/"+repo+"/hooks")
	if err != nil {
		d.fail(what, "%v", err)
		return
	}
	if resp.status != http.StatusOK {
		d.fail(what, "cannot list the webhooks of %s (%s): listing them needs admin on the repository and the scope admin:repo_hook, or \"Webhooks\": Read; or remove surfaces.github.webhook_secret to poll only",
			repo, resp.message())
		return
	}
	var hooks []struct {
		Active bool     `json:"active"`
		Events []string `json:"events"`
		Config struct {
			URL string `json:"url"`
		} `json:"config"`
	}
	if err := json.Unmarshal(resp.body, &hooks); err != nil {
		d.fail(what, "%s: %v", repo, err)
		return
	}
	for _, h := range hooks {
		if h.Active && (slices.Contains(h.Events, "issue_comment") || slices.Contains(h.Events, "*")) {
			d.ok(what, "%s sends issue_comment events to %s", repo, h.Config.URL)
			return
		}
	}
	d.fail(what, "surfaces.github.webhook_secret is set but no active webhook of %s sends issue_comment events: add one (repository Settings, Webhooks) pointing at serve's /github/webhook, content type application/json, with that secret", repo)
}

// Discord permission bits (Discord's documentation, "Permissions").
const (
	discordAdministrator         = 1 << 3
	discordViewChannel           = 1 << 10
	discordSendMessages          = 1 << 11
	discordReadMessageHistory    = 1 << 16
	discordCreatePublicThreads   = 1 << 35
	discordSendMessagesInThreads = 1 << 38
)

func (m *Main) doctorDiscord(ctx context.Context, d *doctor) {
	dc := m.Config.Surfaces.Discord
	if !dc.Enabled {
		return
	}
	const what = "discord"
	if dc.Token == "" || dc.ChannelID == "" {
		return // reported with the configuration's problems
	}
	base := strings.TrimRight(dc.APIURL, "/")
	if base == "" {
		base = "https://discord.com"
	}
	c := &ghCall{hc: d.hc, base: base + "/api/v10", auth: "Bot " + dc.Token}
	resp, err := c.get(ctx, "/users/@me")
	if err != nil {
		d.fail(what, "%v: check surfaces.discord.api_url and the network", err)
		return
	}
	if resp.status != http.StatusOK {
		d.fail(what, "the bot token of surfaces.discord.token is refused (%s): reset it in the Discord developer portal (Bot, Reset Token) and put it in the environment variable it reads", resp.message())
		return
	}
	var me struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	}
	json.Unmarshal(resp.body, &me)
	resp, err = c.get(ctx, "/channels/"+dc.ChannelID)
	if err != nil {
		d.fail(what, "%v", err)
		return
	}
	if resp.status != http.StatusOK {
		d.fail(what, "the bot %s cannot see the channel %s (surfaces.discord.channel_id) (%s): check the ID, invite the bot to the server and give it View Channel there",
			me.Username, dc.ChannelID, resp.message())
		return
	}
	var ch struct {
		GuildID    string             `json:"guild_id"`
		Overwrites []discordOverwrite `json:"permission_overwrites"`
	}
	json.Unmarshal(resp.body, &ch)
	perms, err := discordPermissions(ctx, c, ch.GuildID, me.ID, ch.Overwrites)
	if err != nil {
		d.warn(what, "the bot %s sees the channel %s; its permissions there could not be read (%v), so posting is checked only when a question is asked", me.Username, dc.ChannelID, err)
		return
	}
	need := []struct {
		bit  int64
		name string
	}{{discordViewChannel, "View Channel"}, {discordSendMessages, "Send Messages"}, {discordReadMessageHistory, "Read Message History"}}
	if dc.ThreadPerRun {
		need = append(need, struct {
			bit  int64
			name string
		}{discordCreatePublicThreads, "Create Public Threads"}, struct {
			bit  int64
			name string
		}{discordSendMessagesInThreads, "Send Messages in Threads"})
	}
	var missing []string
	for _, p := range need {
		if perms&discordAdministrator == 0 && perms&p.bit == 0 {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		d.fail(what, "the bot %s lacks %s in the channel %s: give its role these permissions on the channel (Edit Channel, Permissions)", me.Username, strings.Join(missing, ", "), dc.ChannelID)
		return
	}
	d.ok(what, "the bot %s can see and post in the channel %s", me.Username, dc.ChannelID)
}

type discordOverwrite struct {
	ID    string `json:"id"`
	Type  int    `json:"type"` // 0 role, 1 member
	Allow string `json:"allow"`
	Deny  string `json:"deny"`
}

// discordPermissions computes the member userID's permissions in a channel
// of guild, as Discord documents it: the @everyone role's and the member's
// roles' permissions, then the channel's overwrites for @everyone, for the
// roles, for the member. The guild's owner and administrators have all.
func discordPermissions(ctx context.Context, c *ghCall, guild, userID string, ows []discordOverwrite) (int64, error) {
	resp, err := c.get(ctx, "/guilds/"+guild+"/roles")
	if err != nil {
		return 0, err
	}
	if resp.status != http.StatusOK {
		return 0, fmt.Errorf("GET /guilds/%s/roles: %s", guild, resp.message())
	}
	var roles []struct {
		ID          string `json:"id"`
		Permissions string `json:"permissions"`
	}
	if err := json.Unmarshal(resp.body, &roles); err != nil {
		return 0, err
	}
	resp, err = c.get(ctx, "/guilds/"+guild+"/members/"+userID)
	if err != nil {
		return 0, err
	}
	if resp.status != http.StatusOK {
		return 0, fmt.Errorf("GET /guilds/%s/members/%s: %s", guild, userID, resp.message())
	}
	var member struct {
		Roles []string `json:"roles"`
	}
	if err := json.Unmarshal(resp.body, &member); err != nil {
		return 0, err
	}
	bits := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	var perms int64
	for _, r := range roles {
		if r.ID == guild || slices.Contains(member.Roles, r.ID) {
			perms |= bits(r.Permissions)
		}
	}
	if perms&discordAdministrator != 0 {
		return perms, nil
	}
	var allow, deny int64
	for _, o := range ows { // @everyone first
		if o.Type == 0 && o.ID == guild {
			perms = perms&^bits(o.Deny) | bits(o.Allow)
		}
	}
	for _, o := range ows {
		if o.Type == 0 && o.ID != guild && slices.Contains(member.Roles, o.ID) {
			allow |= bits(o.Allow)
			deny |= bits(o.Deny)
		}
	}
	perms = perms&^deny | allow
	for _, o := range ows {
		if o.Type == 1 && o.ID == userID {
			perms = perms&^bits(o.Deny) | bits(o.Allow)
		}
	}
	return perms, nil
}

func (m *Main) doctorStore(ctx context.Context, d *doctor) {
	what := "store"
	if m.Config.DatabaseURL != "" {
		what = "store (database_url)"
	}
	st, err := store.OpenDatabase(ctx, m.Config.StateDir, m.Config.DatabaseURL)
	if err != nil {
		fix := "check state_dir: it must be a writable directory"
		if m.Config.DatabaseURL != "" {
			fix = "check database_url: the server must be reachable and the user allowed to create tables"
		}
		d.fail(what, "%v: %s", redactURL(err, m.Config.DatabaseURL), fix)
		return
	}
	defer st.Close()
	if m.Config.DatabaseURL != "" {
		d.ok(what, "PostgreSQL is reachable and its schema up to date")
		return
	}
	d.ok(what, "%s is reachable and its schema up to date", filepath.Join(m.Config.StateDir, store.FileName))
}

// redactURL keeps a database URL's password out of err's text.
func redactURL(err error, url string) error {
	if url == "" || !strings.Contains(err.Error(), url) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), url, "database_url"))
}

func noneIfEmpty(s []string) string {
	if len(s) == 0 || (len(s) == 1 && s[0] == "") {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
