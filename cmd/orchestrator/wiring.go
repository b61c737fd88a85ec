package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

// This file is where everything meets: the configuration, a spec's
// overrides and the run's own options become an executor, surfaces and a
// runner. Backends never see the configuration types; this is the one
// explicit switch that builds them.

// runOptions is kept with a run (store.Run.Options), so that whoever
// resumes it builds the same agent and surfaces.
type runOptions struct {
	SpecPath string `json:"spec_path,omitempty"`
	// Env is extra environment for the agent (rehearsals point the CLI at
	// the built-in fake API with it). Never secrets: it is stored.
	Env map[string]string `json:"env,omitempty"`
}

func decodeRunOptions(run store.Run) (runOptions, error) {
	var o runOptions
	if len(run.Options) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(run.Options, &o); err != nil {
		return o, fmt.Errorf("run %s: options: %w", run.ID, err)
	}
	return o, nil
}

// openStore opens the state directory's store, closed by Main.Close.
func (m *Main) openStore(ctx context.Context) (*store.Store, error) {
	st, err := store.Open(ctx, m.Config.StateDir)
	if err != nil {
		return nil, err
	}
	m.OnClose(st.Close)
	return st, nil
}

// executorConfig is the agent configuration of the config file with a
// spec's overrides and extra environment applied.
func (m *Main) executorConfig(sp *specs.Spec, env map[string]string) executor.Config {
	a := m.Config.Agent
	c := executor.Config{
		Command:                    a.Command,
		Harness:                    a.Harness,
		Model:                      a.Model,
		AllowedTools:               a.AllowedTools,
		DisallowedTools:            a.DisallowedTools,
		PermissionMode:             a.PermissionMode,
		MCPConfig:                  a.MCPConfig,
		MCPServers:                 a.MCPServers,
		StrictMCPConfig:            a.StrictMCPConfig,
		MaxTurns:                   a.MaxTurns,
		AppendSystemPrompt:         systemPrompt(a.AppendSystemPrompt),
		DangerouslySkipPermissions: a.DangerouslySkipPermissions,
		Env:                        map[string]string{},
		Timeout:                    a.Timeout.Std(),
		IdleTimeout:                a.IdleTimeout.Std(),
		MaxLineBytes:               a.MaxLineBytes.Int(),
		Logger:                     m.Logger,
	}
	for k, v := range a.Env {
		c.Env[k] = v
	}
	for k, v := range env {
		c.Env[k] = v
	}
	if sp != nil {
		o := sp.Agent
		if o.Model != "" {
			c.Model = o.Model
		}
		if o.AllowedTools != nil {
			c.AllowedTools = o.AllowedTools
		}
		if o.DisallowedTools != nil {
			c.DisallowedTools = o.DisallowedTools
		}
		if o.MCPConfig != "" {
			c.MCPConfig, c.MCPServers = o.MCPConfig, nil
		}
		if o.PermissionMode != "" {
			c.PermissionMode = o.PermissionMode
		}
		if o.MaxTurns != 0 {
			c.MaxTurns = o.MaxTurns
		}
		if o.Timeout != 0 {
			c.Timeout = o.Timeout
		}
		if o.IdleTimeout != 0 {
			c.IdleTimeout = o.IdleTimeout
		}
	}
	return c
}

// systemPrompt is the question protocol, then the configured extra text.
func systemPrompt(extra string) string {
	p := questions.ProtocolPrompt()
	if extra = strings.TrimSpace(extra); extra != "" {
		p += "\n\n" + extra
	}
	return p
}

// specOf loads the spec a run was started from, if any.
func (m *Main) specOf(run store.Run) (*specs.Spec, error) {
	o, err := decodeRunOptions(run)
	if err != nil || o.SpecPath == "" {
		return nil, err
	}
	sp, err := specs.Load(o.SpecPath)
	if err != nil {
		return nil, fmt.Errorf("run %s: load its spec: %w", run.ID, err)
	}
	return &sp, nil
}

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
	if ref != nil {
		b, _ := json.Marshal(ref)
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

// buildSurface is the explicit switch from a surface's name to its package.
func (m *Main) buildSurface(name string, ref *specs.SurfaceRef, st *store.Store) (surfaces.Surface, error) {
	switch name {
	case specs.SurfaceTerminal:
		out := m.Stdout
		if m.termOut != nil {
			out = m.termOut
		}
		pretty, echo := false, true
		if f, ok := out.(*os.File); ok {
			pretty = terminal.IsTerminal(f)
		}
		if f, ok := m.Stdin.(*os.File); ok {
			echo = !terminal.IsTerminal(f)
		}
		return terminal.New(m.Stdin, out, terminal.Options{Logger: m.Logger, Pretty: pretty, Echo: echo,
			Command: "orchestrator", By: whoami()}), nil
	case specs.SurfaceGitHub:
		return m.buildGitHub(ref, st)
	case specs.SurfaceDiscord:
		return m.buildDiscord(ref, st)
	default:
		return nil, fmt.Errorf("unknown surface %q (want terminal, github or discord)", name)
	}
}

// buildDiscord makes a Discord surface for the configured channel, or a
// spec's. Its messages are remembered in the store, so that a restarted
// process finds them instead of posting again.
func (m *Main) buildDiscord(ref *specs.SurfaceRef, st *store.Store) (surfaces.Surface, error) {
	dc := m.Config.Surfaces.Discord
	cfg := discord.Config{
		Token:         dc.Token,
		ChannelID:     dc.ChannelID,
		ThreadPerRun:  dc.ThreadPerRun,
		AllowUsers:    dc.AllowUsers,
		AllowRoles:    dc.AllowRoles,
		AcceptReplies: dc.AcceptReplies,
		APIURL:        dc.APIURL,
		GatewayURL:    dc.GatewayURL,
		Refs:          st.RefsFor(specs.SurfaceDiscord),
		Logger:        m.Logger.With("surface", "discord"),
	}
	if ref != nil && ref.Discord != nil {
		if ref.Discord.ChannelID != "" {
			cfg.ChannelID = ref.Discord.ChannelID
		}
		if ref.Discord.ThreadPerRun != nil {
			cfg.ThreadPerRun = *ref.Discord.ThreadPerRun
		}
	}
	if m.metrics != nil {
		cfg.HTTPClient = &http.Client{Timeout: 20 * time.Second, Transport: m.metrics.InstrumentTransport("discord", http.DefaultTransport)}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	for _, w := range cfg.Warnings() {
		m.Logger.Warn("discord: " + w)
	}
	sf, err := discord.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	m.OnClose(sf.Close)
	return sf, nil
}

// buildGitHub makes a GitHub surface for the configured repository and
// issue, or a spec's. All of them share one client: one poller per
// repository, one webhook handler.
func (m *Main) buildGitHub(ref *specs.SurfaceRef, st *store.Store) (surfaces.Surface, error) {
	gc := m.Config.Surfaces.GitHub
	if m.github == nil {
		cc := github.ClientConfig{
			BaseURL:       gc.BaseURL,
			Token:         gc.Token,
			PollInterval:  gc.PollInterval.Std(),
			WebhookSecret: gc.WebhookSecret,
			Logger:        m.Logger.With("surface", "github"),
		}
		if st != nil {
			cc.Ledger = st // decisions about comments outlive the process
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
		if m.handlers != nil && gc.WebhookSecret != "" {
			h, err := client.WebhookHandler()
			if err != nil {
				return nil, fmt.Errorf("github webhook: %w", err)
			}
			m.handlers["POST /webhooks/github"] = h
		}
	}
	sc := github.SurfaceConfig{Repo: gc.Repo, Issue: gc.Issue, Labels: gc.Labels, Allow: gc.Allow, AllowOnly: gc.AllowOnly,
		MaxAnswerBytes: m.Config.Run.AnswerMaxBytes.Int(), Progress: gc.Progress}
	if ref != nil && ref.GitHub != nil {
		o := ref.GitHub
		if o.Repo != "" {
			sc.Repo = o.Repo
		}
		if o.Issue != 0 {
			sc.Issue = o.Issue
		}
		if o.Labels != nil {
			sc.Labels = o.Labels
		}
	}
	return m.github.Surface(sc)
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
		sf, err := s.get(name, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, sf)
	}
	return out, nil
}

// defaultSurfaces are the config's enabled surfaces.
func (m *Main) defaultSurfaces() []string {
	var out []string
	if m.Config.Surfaces.Terminal.Enabled {
		out = append(out, specs.SurfaceTerminal)
	}
	if m.Config.Surfaces.GitHub.Enabled {
		out = append(out, specs.SurfaceGitHub)
	}
	if m.Config.Surfaces.Discord.Enabled {
		out = append(out, specs.SurfaceDiscord)
	}
	return out
}

// newRunner builds the runner over st, with every run's agent and surfaces
// built from the configuration, the run's spec and its stored options.
func (m *Main) newRunner(st *store.Store, observe func(runner.Event)) (*runner.Runner, *surfaceSet, error) {
	ss := m.newSurfaceSet(st)
	rc := m.Config.Run
	r, err := runner.New(runner.Config{
		Store: st,
		Agent: func(run store.Run) (runner.Agent, error) {
			sp, err := m.specOf(run)
			if err != nil {
				m.Logger.Warn("using the configuration's agent settings", "run", run.ID, "err", err)
			}
			o, err := decodeRunOptions(run)
			if err != nil {
				return nil, err
			}
			return executor.New(m.executorConfig(sp, o.Env))
		},
		Surfaces: func(run store.Run) ([]surfaces.Surface, error) {
			sp, _ := m.specOf(run)
			return ss.surfacesFor(run, sp)
		},
		Policy: func(run store.Run) runner.Policy {
			sp, _ := m.specOf(run)
			return m.policyOf(sp, ss)
		},
		Observe:   observe,
		Failpoint: m.failpoint(),
		// serve keeps waiting when its terminal has no input; run and
		// resume exit 3 instead.
		KeepWaiting: m.serving,
		Limits: runner.Limits{
			MaxQuestionRounds: rc.MaxQuestionRounds,
			MaxCorrections:    rc.MaxCorrections,
			RateLimitRetries:  rc.RateLimitRetries,
			RateLimitBackoff:  rc.RateLimitBackoff.Std(),
			AnswerMaxBytes:    rc.AnswerMaxBytes.Int(),
		},
		Logger: m.Logger,
	})
	return r, ss, err
}

// policyOf turns a spec's question settings into the runner's policy.
func (m *Main) policyOf(sp *specs.Spec, ss *surfaceSet) runner.Policy {
	if sp == nil {
		return runner.Policy{}
	}
	p := runner.Policy{
		QuestionTimeout: sp.QuestionTimeout,
		RemindEvery:     sp.RemindEvery,
		OnTimeout:       runner.OnTimeout{Action: sp.OnTimeout.Action, Option: sp.OnTimeout.Option},
	}
	for _, a := range sp.Answers {
		p.Presets = append(p.Presets, runner.Preset{Match: a.Match, Answer: a.Answer})
	}
	if sp.EscalateTo != "" {
		esc, err := ss.get(sp.EscalateTo, sp.Escalation)
		if err != nil {
			m.Logger.Error("escalation surface", "spec", sp.Name, "surface", sp.EscalateTo, "err", err)
		} else {
			p.EscalateTo = esc
		}
	}
	return p
}

var errNoSurface = errors.New("no surface to ask questions on: enable one in the configuration (surfaces.terminal.enabled) or pass --surface")

// since formats a duration for people.
func since(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// foreground quiets the log of commands that show their own progress (run,
// resume, rehearse): unless the level was chosen (--log-level or
// log.level), only warnings and errors are logged beside the progress.
func (m *Main) foreground() {
	if m.logLevelFlag != "" || m.Config.Line("log.level") != 0 {
		return
	}
	lc := m.Config.Log
	lc.Level = "warn"
	m.Logger = newLogger(m.Stderr, lc)
}

// EnvFailpoint names the environment variable that makes the process kill
// itself with SIGKILL at a step of the run loop (see runner.Config.Failpoint).
// It exists for the crash tests; never set it otherwise.
const EnvFailpoint = "ORCHESTRATOR_FAILPOINT"

func (m *Main) failpoint() func(string) {
	want, ok := m.LookupEnv(EnvFailpoint)
	if !ok || want == "" {
		return nil
	}
	return func(point string) {
		if point == want {
			m.Logger.Warn("failpoint: killing the process", "point", point)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
