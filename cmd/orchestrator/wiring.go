package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// This file is where everything meets: the configuration, a spec's
// overrides and the run's own options become an executor, surfaces and a
// runner. Backends never see the configuration types; this is the one
// explicit switch that builds them.

// runOptions is kept with a run (store.Run.Options), so that whoever
// resumes it builds the same agent and surfaces.
type runOptions struct {
	SpecPath string `json:"spec_path,omitempty"`
	// SpecText is the spec file as it was when the run was created: the
	// run keeps the spec it started with (presets, timeout, escalation,
	// agent overrides), however the file is edited or removed meanwhile.
	SpecText string `json:"spec_text,omitempty"`
	// Env is extra environment for the agent (rehearsals point the CLI at
	// the built-in fake API with it). Never secrets: it is stored.
	Env map[string]string `json:"env,omitempty"`
	// Git delivers the run through git (run --git; delivery.go).
	Git bool `json:"git,omitempty"`
	// Issue is the GitHub issue the run was started from (triggers.go).
	Issue *issueOrigin `json:"issue,omitempty"`
	// Slack is the Slack mention the run was started from (trigger_slack.go).
	Slack *slackOrigin `json:"slack,omitempty"`
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

// openStore opens the store, closed by Main.Close: the state directory's
// SQLite database, or database_url's PostgreSQL database.
func (m *Main) openStore(ctx context.Context) (*store.Store, error) {
	st, err := store.OpenDatabase(ctx, m.Config.StateDir, m.Config.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := writeHookDatabaseURL(m.Config.StateDir, m.Config.DatabaseURL); err != nil {
		st.Close()
		return nil, err
	}
	// Every process that drives a run (serve, run, resume) holds its
	// lease on a shared store for as long as the configuration says.
	st.SetLeaseTTL(m.Config.Serve.LeaseTTL.Std())
	st.SetRuleMaxLifetime(m.Config.Rules.MaxLifetime.Std())
	if k := m.Config.Rules.SuggestAfter; k > 0 {
		st.SetRuleSuggestAfter(k)
	} else {
		st.SetRuleSuggestAfter(-1) // 0 in the configuration: never
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
		PassEnv:                    a.PassEnv,
		DropEnv:                    agentDropEnv(),
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
	c.Secrets = m.agentSecrets()
	if _, ok := c.Env["GH_CONFIG_DIR"]; !ok {
		// No gh login of the service user: an empty config dir of its own.
		c.Env["GH_CONFIG_DIR"] = m.agentGHConfigDir()
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

// specOf returns the spec a run was started from, if any: the text kept
// with the run, or (a run created before the text was kept) the file.
func (m *Main) specOf(run store.Run) (*specs.Spec, error) {
	o, err := decodeRunOptions(run)
	if err != nil || o.SpecPath == "" {
		return nil, err
	}
	var sp specs.Spec
	if o.SpecText != "" {
		sp, err = specs.Parse(o.SpecPath, []byte(o.SpecText))
	} else {
		sp, err = specs.Load(o.SpecPath)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: load its spec: %w", run.ID, err)
	}
	return &sp, nil
}

// newRunner builds the runner over st, with every run's agent and surfaces
// built from the configuration, the run's spec and its stored options.
func (m *Main) newRunner(st *store.Store, observe func(runner.Event)) (*runner.Runner, *surfaceSet, error) {
	ss := m.newSurfaceSet(st)
	rc := m.Config.Run
	r, err := runner.New(runner.Config{
		Store: st,
		// The review intake's 🚀 on the comment feedback came from (review.go).
		FollowUpStarted: m.followUpStarted,
		// Called once per drive: the run's spec (as kept with the run),
		// agent, surfaces and policy; an error fails the run, saying why.
		Resolve: func(run store.Run) (runner.Resolved, error) {
			sp, err := m.specOf(run)
			if err != nil {
				return runner.Resolved{}, err
			}
			o, err := decodeRunOptions(run)
			if err != nil {
				return runner.Resolved{}, err
			}
			c := m.executorConfig(sp, o.Env)
			apol, err := m.nativeAsking(run, sp, &c, st.HeldToken(run.ID)) // approvals_wiring.go
			if err != nil {
				return runner.Resolved{}, err
			}
			agent, err := executor.New(c)
			if err != nil {
				return runner.Resolved{}, err
			}
			m.checkCLIVersion(c) // doctor.go: a warning, once per binary
			surfs, err := ss.surfacesFor(run, sp)
			if err != nil {
				return runner.Resolved{}, fmt.Errorf("surfaces: %w", err)
			}
			pol, err := m.policyOf(sp, ss)
			if err != nil {
				return runner.Resolved{}, err
			}
			pol.MaxTurns = c.MaxTurns // the turn limit the agent was given
			return runner.Resolved{Agent: agent, Surfaces: surfs, Policy: pol, Approvals: apol}, nil
		},
		Observe:   observe,
		Failpoint: m.failpoint,
		// limits.*: the spend caps on all runs together (runner/caps.go).
		Caps:     runner.Caps{DayUSD: m.Config.Limits.CostUSDPerDay, MonthUSD: m.Config.Limits.CostUSDPerMonth, Location: m.Config.Limits.Location()},
		Delivery: m.deliveryFor(st, ss), // delivery.go
		Guard:    m.guardFor(st),        // guard.go
		// serve keeps waiting when its terminal has no input; run and
		// resume exit 3 instead.
		KeepWaiting: m.serving,
		// serve: a waiting run holds no lock, goroutine or process; the
		// (leading) instance asks its questions (runner/room.go).
		Park: m.serving,
		// serve.max_concurrent_runs bounds every CLI a serve starts.
		CLISlots: m.cliSlots(),
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

// policyOf turns a spec's question settings, and its max_cost_usd or else
// the config's, into the runner's policy.
func (m *Main) policyOf(sp *specs.Spec, ss *surfaceSet) (runner.Policy, error) {
	a := m.Config.Agent
	if sp == nil {
		return runner.Policy{MaxCostUSD: a.MaxCostUSD}, nil
	}
	p := runner.Policy{
		QuestionTimeout: sp.QuestionTimeout,
		RemindEvery:     sp.RemindEvery,
		OnTimeout:       runner.OnTimeout{Action: sp.OnTimeout.Action, Option: sp.OnTimeout.Option},
		MaxCostUSD:      cmp.Or(sp.Agent.MaxCostUSD, a.MaxCostUSD),
		// A spec's own daily spend cap (runner/caps.go).
		MaxCostUSDPerDay: sp.MaxCostUSDPerDay,
	}
	for _, a := range sp.Answers {
		p.Presets = append(p.Presets, runner.Preset{Match: a.Match, Answer: a.Answer})
	}
	if sp.EscalateTo != "" {
		esc, err := ss.get(sp.EscalateTo, sp.Escalation)
		if err != nil {
			return p, fmt.Errorf("escalation surface %s of spec %s: %w", sp.EscalateTo, sp.Name, err)
		}
		p.EscalateTo = esc
	}
	return p, nil
}

// orchestratorSecretEnv are variables of the orchestrator's own
// environment whose values are its credentials even when the configuration
// does not name them (the store reads PGPASSWORD, delivery hands git
// ORCHESTRATOR_GIT_TOKEN).
var orchestratorSecretEnv = []string{config.EnvDatabaseURL, "ORCHESTRATOR_GIT_TOKEN", "PGPASSWORD"}

// agentSecrets are the values the agent never gets, whatever the variable
// carrying them is called: every secret of the configuration, and the
// orchestrator's own credential variables.
func (m *Main) agentSecrets() []string {
	var out []string
	for _, s := range m.Config.Secrets() {
		out = append(out, s.Value)
	}
	for _, name := range orchestratorSecretEnv {
		if v, ok := m.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
			out = append(out, v)
		}
	}
	return out
}

// agentGHConfigDir is the gh config dir the agent gets unless its env names
// one: an empty private directory in the state dir, so that the agent's gh
// has no login (neither the service user's nor a person's).
func (m *Main) agentGHConfigDir() string {
	dir := filepath.Join(m.Config.StateDir, "agent-gh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		m.Logger.Warn("agent gh config dir", "dir", dir, "err", err)
	}
	return dir
}

// cliSlots is the bound on the agent CLIs serve runs at once
// (serve.max_concurrent_runs); nil outside serve or without a bound.
func (m *Main) cliSlots() chan struct{} {
	if n := m.Config.Serve.MaxConcurrentRuns; m.serving && n > 0 {
		return make(chan struct{}, n)
	}
	return nil
}
