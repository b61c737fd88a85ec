package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// defaultHookCommand replaces this executable as the hook's program when
// set (the tests run their own binary as the orchestrator).
var defaultHookCommand string

// approvalsPolicy is a run's tool-call policy: the configuration's
// approvals with the spec's lists and hold over them, the agent's
// allowed_tools left to the CLI. Native asking needs the claude harness.
func (m *Main) approvalsPolicy(sp *specs.Spec, c executor.Config) (approvals.Policy, bool) {
	if c.Harness == executor.HarnessClaw {
		return approvals.Policy{}, false
	}
	a := m.Config.Approvals
	p := approvals.Policy{Allow: a.Allow, Deny: a.Deny, Ask: a.Ask, Hold: a.Hold.Std(), Preallowed: c.AllowedTools}
	if sp != nil && sp.Sections.Approvals != nil {
		o := sp.Sections.Approvals
		if o.Allow != nil {
			p.Allow = o.Allow
		}
		if o.Deny != nil {
			p.Deny = o.Deny
		}
		if o.Ask != nil {
			p.Ask = o.Ask
		}
		if o.Hold != nil {
			p.Hold = o.Hold.Std()
		}
	}
	if c.Timeout > 0 && p.Hold > c.Timeout/2 {
		// The hold must end well before the turn's timeout stops the CLI
		// (and its hook) in the middle of it: past it the call parks.
		p.Hold = c.Timeout / 2
	}
	return p, true
}

// nativeAsking puts the agent of run in the CLI's control protocol with the
// orchestrator's hook, when its policy allows it: the model's AskUserQuestion
// and its permission requests then reach people (docs/approvals.md
// "Approvals and the model's own questions").
// It returns the run's policy, nil when native asking is off.
//
// fence is the fencing token of the drive (store.HeldToken; 0: none): the
// hook carries it and refuses the calls of a CLI whose drive was fenced out.
func (m *Main) nativeAsking(run store.Run, sp *specs.Spec, c *executor.Config, fence int64) (*approvals.Policy, error) {
	p, ok := m.approvalsPolicy(sp, *c)
	if !ok {
		return nil, nil
	}
	state, err := filepath.Abs(m.Config.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	prefix := m.hookCommand
	if prefix == "" {
		prefix = defaultHookCommand
	}
	if prefix == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("the orchestrator's own path, for the agent's hook: %w", err)
		}
		prefix = shQuote(exe)
	}
	hold := int(p.Hold / time.Second)
	c.ControlProtocol = true
	c.Settings = hookSettings(prefix, state, run.ID, hold, os.Getpid(), fence, m.Config.DatabaseURL != "")
	// The hook waits up to the hold with the CLI silent: the runner holds
	// the CLI's idle clock while it asks (executor.Process.Hold), so
	// idle_timeout keeps meaning what it says.
	return &p, nil
}

// callSummary is a tool call's input on one line, printable: the command,
// the file, or the JSON.
func callSummary(input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	for _, k := range []string{"command", "file_path", "path", "url"} {
		if v, ok := in[k].(string); ok {
			return questions.Printable(strings.Join(strings.Fields(v), " "))
		}
	}
	return questions.Printable(string(input))
}
