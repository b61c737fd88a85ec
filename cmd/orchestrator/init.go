package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/tty"
)

// initOptions is what `orchestrator init` writes: from its flags, or the
// answers given at a terminal.
type initOptions struct {
	dir             string
	surfaces        []string
	repo            string
	githubTokenEnv  string
	discordTokenEnv string
	discordChannel  string
	deliver         bool
	name            string
	agentCommand    string
	force           bool
}

// envNameRE is a variable name ${VAR} may use.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// specNameRE is a spec name init accepts: it names the file too.
var specNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// initFlags are init's own flags.
var initFlags = []string{"dir", "surface", "repo", "github-token-env", "discord-token-env", "discord-channel",
	"deliver", "no-deliver", "name", "agent-command", "force"}

func (m *Main) newInitCmd() *cobra.Command {
	o := initOptions{githubTokenEnv: "GITHUB_TOKEN", discordTokenEnv: "DISCORD_TOKEN", name: "first-task", dir: "."}
	var noDeliver bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a first orchestrator.yaml and spec",
		Long: `init writes orchestrator.yaml and a first spec (specs/NAME.md) that
'orchestrator validate' accepts and 'orchestrator rehearse' runs, then prints
the commands to run next. At a terminal, with no flags, it asks which surfaces
to ask on, the repository, which environment variables hold the tokens and
whether to deliver through git; with any flag it asks nothing. Tokens are
never written: the file reads them from the environment as ${VAR}.

It never replaces an existing file unless --force is given (exit 2 naming it).`,
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(), // it writes the configuration
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("no-deliver") {
				if cmd.Flags().Changed("deliver") {
					return usageError(errors.New("--deliver and --no-deliver: give one"))
				}
				o.deliver = !noDeliver
			}
			// Any flag of init's own says what to write: nothing is asked
			// (--config or --log-level, the root's, do not count).
			ask := tty.IsTerminal(m.Stdin) && !slices.ContainsFunc(initFlags, cmd.Flags().Changed)
			return m.runInit(o, ask)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", o.dir, "the directory to write orchestrator.yaml and specs/ in")
	f.StringSliceVar(&o.surfaces, "surface", nil, "where questions are asked: terminal, github, discord (repeatable; default terminal)")
	f.StringVar(&o.repo, "repo", "", "the GitHub repository, owner/name (questions on its issues, pull requests to it)")
	f.StringVar(&o.githubTokenEnv, "github-token-env", o.githubTokenEnv, "the environment variable that holds the GitHub token")
	f.StringVar(&o.discordTokenEnv, "discord-token-env", o.discordTokenEnv, "the environment variable that holds the Discord bot token")
	f.StringVar(&o.discordChannel, "discord-channel", "", "the Discord channel ID questions are asked in (digits)")
	f.BoolVar(&o.deliver, "deliver", false, "deliver each run as a git branch (and a pull request when --repo is given)")
	f.BoolVar(&noDeliver, "no-deliver", false, "do not deliver through git (the default)")
	f.StringVar(&o.name, "name", o.name, "the first spec's name: specs/NAME.md")
	f.StringVar(&o.agentCommand, "agent-command", "", "the Claude Code CLI to run, when it is not \"claude\" on PATH")
	f.BoolVar(&o.force, "force", false, "replace orchestrator.yaml and the spec when they exist")
	return cmd
}

func (m *Main) runInit(o initOptions, ask bool) error {
	if ask {
		if err := askInit(bufio.NewReader(m.Stdin), m.Stdout, &o); err != nil {
			return err
		}
	}
	if len(o.surfaces) == 0 {
		o.surfaces = []string{"terminal"}
	}
	if err := o.check(); err != nil {
		return usageError(err)
	}
	dir := m.path(o.dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return usageError(fmt.Errorf("--dir %s: %w", o.dir, err))
	}
	files := []struct{ path, content string }{
		{filepath.Join(dir, DefaultConfigFile), o.config()},
		{filepath.Join(dir, "specs", o.name+".md"), o.spec()},
	}
	if !o.force {
		for _, f := range files {
			if _, err := os.Lstat(f.path); err == nil {
				return configError(fmt.Errorf("%s exists: not replaced (--force replaces it)", f.path))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return configError(fmt.Errorf("%s: %w", f.path, err))
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFileAtomic(f.path, f.content); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "wrote %s\n", f.path)
	}
	fmt.Fprint(m.Stdout, o.next())
	return nil
}

// writeFileAtomic writes content to path through a temporary file renamed
// into place, so that an interrupted init leaves no half-written file.
func writeFileAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// check reports the first problem of o, naming the flag.
func (o *initOptions) check() error {
	for _, s := range o.surfaces {
		if !slices.Contains([]string{"terminal", "github", "discord"}, s) {
			return fmt.Errorf("--surface %q: want terminal, github or discord", s)
		}
	}
	o.surfaces = slices.Compact(slices.Sorted(slices.Values(o.surfaces)))
	if o.repo != "" {
		if ow, n, ok := strings.Cut(o.repo, "/"); !ok || ow == "" || n == "" || strings.Contains(n, "/") {
			return fmt.Errorf("--repo %q: want owner/name", o.repo)
		}
	}
	if o.has("github") && o.repo == "" {
		return errors.New("--surface github needs --repo owner/name: the repository whose issues questions are asked on")
	}
	if o.has("github") || (o.deliver && o.repo != "") {
		if !envNameRE.MatchString(o.githubTokenEnv) {
			return fmt.Errorf("--github-token-env %q: want an environment variable's name, such as GITHUB_TOKEN (the token itself is never written)", o.githubTokenEnv)
		}
	}
	if o.has("discord") {
		if !envNameRE.MatchString(o.discordTokenEnv) {
			return fmt.Errorf("--discord-token-env %q: want an environment variable's name, such as DISCORD_TOKEN (the token itself is never written)", o.discordTokenEnv)
		}
		if _, err := strconv.ParseUint(o.discordChannel, 10, 64); err != nil {
			return fmt.Errorf("--surface discord needs --discord-channel ID, the channel's numeric ID (Discord: Developer Mode, right-click the channel, Copy Channel ID); got %q", o.discordChannel)
		}
	}
	if !specNameRE.MatchString(o.name) {
		return fmt.Errorf("--name %q: want lower-case letters, digits and dashes", o.name)
	}
	if strings.ContainsAny(o.agentCommand, "\n\"") {
		return fmt.Errorf("--agent-command %q: not a usable command", o.agentCommand)
	}
	return nil
}

func (o *initOptions) has(surface string) bool { return slices.Contains(o.surfaces, surface) }

// config is the orchestrator.yaml of o.
func (o *initOptions) config() string {
	var b strings.Builder
	b.WriteString(`# Written by orchestrator init. config.example.yaml describes every key;
# 'orchestrator validate' checks this file, 'orchestrator doctor' checks it
# against the services it names. Tokens are read from the environment.
`)
	if o.agentCommand != "" {
		fmt.Fprintf(&b, "\nagent:\n  command: %q\n", o.agentCommand)
	}
	b.WriteString("\nspecs:\n  dir: specs\n\nsurfaces:\n")
	if o.has("terminal") {
		b.WriteString("  terminal:\n    enabled: true\n")
	}
	if o.has("github") {
		fmt.Fprintf(&b, "  github:\n    enabled: true\n    repo: %s\n    token: ${%s}\n", o.repo, o.githubTokenEnv)
	}
	if o.has("discord") {
		fmt.Fprintf(&b, "  discord:\n    enabled: true\n    channel_id: %q\n    token: ${%s}\n", o.discordChannel, o.discordTokenEnv)
	}
	if o.deliver {
		b.WriteString("\n# Each run works on a branch of its own and commits its work there.\ngit:\n  enabled: true\n")
		if o.repo != "" {
			fmt.Fprintf(&b, "  repo: %s\n", o.repo)
			if !o.has("github") {
				fmt.Fprintf(&b, "  token: ${%s}\n", o.githubTokenEnv)
			}
			b.WriteString("  pull_request:\n    enabled: true\n")
		}
	}
	return b.String()
}

// spec is the first spec of o.
func (o *initOptions) spec() string {
	return fmt.Sprintf(`---
# Your first spec, written by orchestrator init. 'orchestrator rehearse
# specs/%[1]s.md' runs it with the real CLI against a scripted model (no
# API key, no tokens); 'orchestrator run specs/%[1]s.md' runs it for real.
name: %[1]s
surfaces: [%[2]s]
allowed_tools: [Read, Edit, Write]
max_turns: 30
timeout: 30m
question_timeout: 24h
on_timeout: fail
---
Read this project and write a short overview of it in OVERVIEW.md: what it
does, how it is built and tested, and where to start reading.

If it is unclear who the overview is for, ask before you start.
`, o.name, strings.Join(o.surfaces, ", "))
}

// next is what to run after init.
func (o *initOptions) next() string {
	var b strings.Builder
	b.WriteString("\nNext:\n")
	if o.dir != "." && o.dir != "" {
		fmt.Fprintf(&b, "  cd %s\n", shellWord(o.dir))
	}
	if o.has("github") || (o.deliver && o.repo != "") {
		fmt.Fprintf(&b, "  export %s=...   # a GitHub token (see docs/surfaces.md)\n", o.githubTokenEnv)
	}
	if o.has("discord") {
		fmt.Fprintf(&b, "  export %s=...   # the Discord bot's token\n", o.discordTokenEnv)
	}
	fmt.Fprintf(&b, "  orchestrator validate                          # check the files\n")
	fmt.Fprintf(&b, "  orchestrator doctor                            # check the CLI, tokens and store\n")
	if o.deliver {
		// Delivery works in a git checkout: the rehearsal's own empty
		// directory is none, so it rehearses on a branch of this one.
		fmt.Fprintf(&b, "  orchestrator rehearse --workdir . specs/%s.md   # the whole loop on a branch of this git checkout, no API key\n", o.name)
	} else {
		fmt.Fprintf(&b, "  orchestrator rehearse specs/%s.md   # the whole loop, no API key\n", o.name)
	}
	fmt.Fprintf(&b, "  orchestrator run specs/%s.md        # for real\n", o.name)
	return b.String()
}

// shellWord quotes s for a shell when it needs it.
func shellWord(s string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_./~-]+$`).MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// askInit asks at a terminal what init writes, each question with its
// default in brackets (an empty line takes it).
func askInit(r *bufio.Reader, w io.Writer, o *initOptions) error {
	ask := func(q, def string) (string, error) {
		if def != "" {
			fmt.Fprintf(w, "%s [%s]: ", q, def)
		} else {
			fmt.Fprintf(w, "%s: ", q)
		}
		line, err := r.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			if err == io.EOF {
				return "", errors.New("init: no answer (stdin closed); give flags instead, see --help")
			}
			return "", err
		}
		if line = strings.TrimSpace(line); line == "" {
			return def, nil
		}
		return line, nil
	}
	yes := func(s string) bool { s = strings.ToLower(s); return s == "y" || s == "yes" }
	for {
		s, err := ask("Surfaces to ask on (terminal, github, discord; comma-separated)", "terminal")
		if err != nil {
			return err
		}
		o.surfaces = nil
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				o.surfaces = append(o.surfaces, x)
			}
		}
		bad := slices.IndexFunc(o.surfaces, func(x string) bool { return !slices.Contains([]string{"terminal", "github", "discord"}, x) })
		if bad < 0 && len(o.surfaces) > 0 {
			break
		}
		fmt.Fprintln(w, "  want terminal, github or discord")
	}
	d, err := ask("Deliver each run as a git branch (y/n)", "n")
	if err != nil {
		return err
	}
	o.deliver = yes(d)
	if o.has("github") || o.deliver {
		for {
			q := "GitHub repository (owner/name)"
			if !o.has("github") {
				q += ", for pull requests; empty for none"
			}
			if o.repo, err = ask(q, ""); err != nil {
				return err
			}
			ow, n, ok := strings.Cut(o.repo, "/")
			if (o.repo == "" && !o.has("github")) || (ok && ow != "" && n != "" && !strings.Contains(n, "/")) {
				break
			}
			fmt.Fprintln(w, "  want owner/name")
		}
	}
	if o.has("github") || (o.deliver && o.repo != "") {
		if o.githubTokenEnv, err = ask("Environment variable holding the GitHub token", o.githubTokenEnv); err != nil {
			return err
		}
	}
	if o.has("discord") {
		if o.discordTokenEnv, err = ask("Environment variable holding the Discord bot token", o.discordTokenEnv); err != nil {
			return err
		}
		if o.discordChannel, err = ask("Discord channel ID (digits)", ""); err != nil {
			return err
		}
	}
	return nil
}
