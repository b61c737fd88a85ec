package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/daemon"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

// The store is the GitHub surface's ledger, and knows the answers taken.
var _ github.AnswerLedger = (*store.Store)(nil)

// surfaceKind is one surface the program knows. Its configuration block is
// the field of config.Surfaces whose yaml key is name: that type holds the
// block's keys, their defaults (config.Default), their validation
// (SurfaceConfig.Check), whether the surface is on (SurfaceConfig.On) and
// which keys a spec may override (tagged spec:"override"). The rest lives
// here: what --help says, and how the surface is built.
type surfaceKind struct {
	// name is the surface's name in the configuration, specs, --surface
	// and the store.
	name string
	// help says in one line where the surface asks, for --help.
	help string
	// build makes the surface from its configuration block, the
	// configuration's with a spec's override applied.
	build func(m *Main, block config.SurfaceConfig, st *store.Store) (surfaces.Surface, error)
	// envPrefixes are the prefixes of the surface's own environment
	// variables (its tokens): the agent never inherits them (agentDropEnv).
	envPrefixes []string
	// tokenSamples are made-up tokens of each shape the surface's
	// credentials take: questions.Redact must hide every one of them
	// (TestSurfaceSecrets), so that none is printed or posted.
	tokenSamples []string
}

// surfaceKinds is the table of surfaces, in the order of config.Surfaces.
// A new surface is a package under surfaces/, its block in config.Surfaces
// and a row here (TestSurfaceKinds checks they agree and are documented).
var surfaceKinds = []surfaceKind{
	{name: "terminal", help: "asks on this terminal when stdin is one", build: buildTerminal},
	{name: "github", help: "asks in GitHub issue comments (an issue per run, or one issue)", build: buildGitHub,
		envPrefixes:  []string{"GITHUB_", "GH_"},
		tokenSamples: []string{"ghp_" + "0123456789abcdefghijABCDEFGHIJ012345", "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop"}},
	{name: "discord", help: "asks in a Discord channel, with buttons for the options", build: buildDiscord,
		envPrefixes:  []string{"DISCORD_"},
		tokenSamples: []string{"MTA4NjY1NzQ4NzI4NjA1OTk2OA" + ".GsX5Yq." + "abcdefghijklmnopqrstuvwxyz0123456789ab"}},
	{name: "slack", help: "asks in a Slack channel (Socket Mode), with buttons, menus and a form", build: buildSlack,
		envPrefixes: []string{"SLACK_"},
		tokenSamples: []string{"xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
			"xoxp-" + "1234567890-1234567890-1234567890123-0123456789abcdef0123456789abcdef",
			"xapp-" + "1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef0123456789abcdef"}},
}

// agentDropEnv are the variables the agent never inherits because a
// surface of the table owns them ("SLACK_*"): executor.Config.DropEnv.
func agentDropEnv() []string {
	var out []string
	for _, k := range surfaceKinds {
		for _, p := range k.envPrefixes {
			out = append(out, p+"*")
		}
	}
	return out
}

func surfaceKindOf(name string) (surfaceKind, bool) {
	for _, k := range surfaceKinds {
		if k.name == name {
			return k, true
		}
	}
	return surfaceKind{}, false
}

// surfaceNames lists the surfaces for messages: "terminal, github or discord".
func surfaceNames(last string) string {
	names := make([]string, len(surfaceKinds))
	for i, k := range surfaceKinds {
		names[i] = k.name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + last + " " + names[len(names)-1]
}

// surfacesHelp is the table's help, one line per surface.
func surfacesHelp() string {
	var b strings.Builder
	for _, k := range surfaceKinds {
		fmt.Fprintf(&b, "  %-9s %s\n", k.name, k.help)
	}
	return b.String()
}

// enabledSurfaces are the surfaces the configuration turns on, in table order.
func enabledSurfaces(cfg config.Config) []string {
	var out []string
	for _, k := range surfaceKinds {
		if sc := cfg.Surfaces.Surface(k.name); sc != nil && sc.On() {
			out = append(out, k.name)
		}
	}
	return out
}

// defaultSurfaces are the config's enabled surfaces.
func (m *Main) defaultSurfaces() []string { return enabledSurfaces(m.Config) }

// surfaceSet builds surfaces by name once per process and hands out the same
// values to every run (one terminal reader, one GitHub poller per repo).
// It is safe for concurrent use: serve drives many runs at once.
type surfaceSet struct {
	m     *Main
	store *store.Store
	mu    sync.Mutex // guards built, and the building (Main's shared clients)
	built map[string]surfaces.Surface
}

func (m *Main) newSurfaceSet(st *store.Store) *surfaceSet {
	return &surfaceSet{m: m, store: st, built: map[string]surfaces.Surface{}}
}

// get returns the named surface with a spec's overrides (nil: none).
func (s *surfaceSet) get(name string, ref *specs.SurfaceRef) (surfaces.Surface, error) {
	key := name
	if ref != nil && ref.Override.Value != nil {
		b, _ := json.Marshal(ref.Override)
		key += string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sf, ok := s.built[key]; ok {
		return sf, nil
	}
	sf, err := s.m.buildSurface(name, ref, s.store)
	if err != nil {
		return nil, err
	}
	s.built[key] = sf
	return sf, nil
}

// health says, by surface name, whether the services of the surfaces built
// serve them (surfaces.HealthReporter): /healthz and orchestrator_surface_up.
func (s *surfaceSet) health() map[string]error {
	s.mu.Lock()
	built := make([]surfaces.Surface, 0, len(s.built))
	for _, sf := range s.built {
		built = append(built, sf)
	}
	s.mu.Unlock()
	out := map[string]error{}
	seen := map[string]bool{} // problems already listed, by surface and text
	for _, sf := range built {
		hr, ok := sf.(surfaces.HealthReporter)
		if !ok {
			continue
		}
		name := sf.Name()
		err := hr.Health()
		if _, ok := out[name]; !ok {
			out[name] = nil
		}
		if err == nil || seen[name+"\x00"+err.Error()] {
			continue
		}
		seen[name+"\x00"+err.Error()] = true
		out[name] = errors.Join(out[name], err)
	}
	return out
}

// buildSurface builds the named surface from the configuration's block
// with the spec's override (ref, nil: none) applied.
func (m *Main) buildSurface(name string, ref *specs.SurfaceRef, st *store.Store) (surfaces.Surface, error) {
	kind, ok := surfaceKindOf(name)
	if !ok {
		return nil, fmt.Errorf("unknown surface %q (want %s)", name, surfaceNames("or"))
	}
	blocks := m.Config.Surfaces // a copy: the override must not change the configuration
	block := blocks.Surface(name)
	if ref != nil {
		ref.Override.Apply(block)
	}
	return kind.build(m, block, st)
}

// surfacesFor returns the surfaces a run asks on.
func (s *surfaceSet) surfacesFor(run store.Run, sp *specs.Spec) ([]surfaces.Surface, error) {
	var out []surfaces.Surface
	for _, name := range run.Surfaces {
		var ref *specs.SurfaceRef
		if sp != nil {
			for i := range sp.Surfaces {
				if sp.Surfaces[i].Name == name {
					ref = &sp.Surfaces[i]
				}
			}
		}
		if name == "github" {
			ref = triggerIssueRef(run, ref) // triggers.go: asked in the issue that started it
		}
		sf, err := s.get(name, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, sf)
	}
	return out, nil
}

func buildTerminal(m *Main, _ config.SurfaceConfig, _ *store.Store) (surfaces.Surface, error) {
	// It prints for a person when its output is a terminal, and echoes
	// what it reads when its input is not one (a pipe).
	var out io.Writer
	var pretty bool
	if m.termOut != nil {
		out, pretty = m.termOut, tty.IsTerminal(m.termOut)
	} else {
		c := m.console() // shared with the progress lines
		out, pretty = c, c.TTY()
	}
	// serve's output is its log: its terminal surface never prompts there,
	// it logs each question once with the command that answers it.
	return m.foregroundTerminal(terminal.New(m.Stdin, out, terminal.Options{Logger: m.Logger, Pretty: pretty, Echo: !tty.IsTerminal(m.Stdin),
		Command: "orchestrator", By: whoami(), Passive: m.serving, Ephemeral: m.rehearsing})), nil
}

// buildDiscord makes a Discord surface for the channel of its block. Its
// messages are remembered in the store, so that a restarted process finds
// them instead of posting again.
func buildDiscord(m *Main, block config.SurfaceConfig, st *store.Store) (surfaces.Surface, error) {
	dc := *block.(*config.Discord)
	cfg := discord.Config{
		Token:         dc.Token,
		ChannelID:     dc.ChannelID,
		ThreadPerRun:  dc.ThreadPerRun,
		AllowUsers:    dc.AllowUsers,
		AllowRoles:    dc.AllowRoles,
		AcceptReplies: dc.AcceptReplies,
		APIURL:        dc.APIURL,
		GatewayURL:    dc.GatewayURL,
		Refs:          st.RefsFor("discord"),
		Logger:        m.Logger.With("surface", "discord"),
		// A click on a set this process does not watch (a restart, a new
		// leader not yet watching it) goes to the store, which decides.
		Lookup: func(ctx context.Context, setID string) (questions.Set, surfaces.Answers, bool, error) {
			rec, err := st.QuestionSet(ctx, setID)
			if errors.Is(err, store.ErrNotFound) {
				return questions.Set{}, nil, false, nil
			}
			if err != nil {
				return questions.Set{}, nil, false, err
			}
			return rec.Set, runOffers{st: st, runID: rec.Set.RunID}, rec.State == store.SetPending, nil
		},
		// A "remember" click after a restart or on another instance finds
		// its offer in the store, and takes it once.
		Offers: runner.RememberOffers{Store: st},
	}
	if m.metrics != nil {
		cfg.HTTPClient = &http.Client{Transport: m.metrics.InstrumentTransport("discord", http.DefaultTransport)}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	cfg.HTTPClient.Timeout = dc.RequestTimeout.Std()
	sf, err := discord.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	m.OnClose(sf.Close)
	return sf, nil
}

// buildGitHub makes a GitHub surface for the repository and issue of its
// block. All of them share one client (built from the keys a spec cannot
// override): one poller per repository, one webhook handler.
func buildGitHub(m *Main, block config.SurfaceConfig, st *store.Store) (surfaces.Surface, error) {
	gc := *block.(*config.GitHub)
	if m.github == nil {
		cc := github.ClientConfig{
			BaseURL:        gc.BaseURL,
			Token:          gc.Token,
			PollInterval:   gc.PollInterval.Std(),
			RequestTimeout: gc.RequestTimeout.Std(),
			WebhookSecret:  gc.WebhookSecret,
			Logger:         m.Logger.With("surface", "github"),
		}
		if st != nil {
			cc.Ledger = st // decisions about comments outlive the process; the answers taken tell a crash's
			// Where each set was asked and the poll cursors: a restart
			// finds the questions without listing their issues.
			cc.Refs = st.RefsFor("github")
		}
		nudges := m.serving && st != nil && st.Shared()
		if nudges {
			cc.OnIdleDelivery = daemon.NudgeGitHub(st, m.Logger)
		}
		if gc.App.Configured() {
			cc.App = &github.AppAuth{ID: gc.App.ID, InstallationID: gc.App.InstallationID, PrivateKeyFile: gc.App.PrivateKeyFile}
		}
		if m.metrics != nil {
			cc.HTTPClient = &http.Client{Transport: m.metrics.InstrumentTransport("github", http.DefaultTransport)}
		}
		client, err := github.NewClient(cc)
		if err != nil {
			return nil, fmt.Errorf("github: %w", err)
		}
		m.github = client
		m.OnClose(client.Close)
		if nudges {
			m.OnClose(daemon.PollGitHubWhenNudged(st, client, m.Logger))
		}
		if m.handlers != nil && gc.WebhookSecret != "" {
			h, err := client.WebhookHandler()
			if err != nil {
				return nil, fmt.Errorf("github webhook: %w", err)
			}
			m.handlers["POST /webhooks/github"] = h
		}
	}
	return m.github.Surface(github.SurfaceConfig{Repo: gc.Repo, Issue: gc.Issue, Labels: gc.Labels, Allow: gc.Allow, AllowOnly: gc.AllowOnly,
		MaxAnswerBytes: m.Config.Run.AnswerMaxBytes.Int(), Progress: gc.Progress, LeaveIssueOpen: !gc.CloseIssue})
}

// runOffers is the surfaces.Answers of one run's sets: the store decides
// (store.OfferFor), as it does for the runner's surfaces.
type runOffers struct {
	st    *store.Store
	runID string
}

func (o runOffers) Offer(ctx context.Context, resp questions.Response) (surfaces.Decision, error) {
	return o.st.OfferFor(ctx, o.runID, resp)
}

// Remember implements surfaces.Rememberer, as the runner's Answers do.
func (o runOffers) Remember(ctx context.Context, req surfaces.RememberRequest) (surfaces.Remembered, error) {
	return runner.RememberOnSurface(ctx, o.st, o.runID, req)
}
