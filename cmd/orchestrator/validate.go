package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [SPEC.md...]",
		Short: "Check the configuration and the spec files",
		Long: `validate reads the configuration and every spec file of specs.dir (or the spec
files given) and prints every problem found, each with its file, line and
key: besides each file's own problems, agent.command must be found (on PATH
or as a path; the default "claude" not found is only a warning), a spec's
workdir must be a directory, its mcp_config a readable JSON file, its
surfaces enabled, its schedule no more frequent than
serve.min_schedule_interval. It exits with 2 when there is any.`,
		Args:        cobra.ArbitraryArgs,
		Annotations: skipConfigAnnotation(), // it reports config problems itself
		RunE:        func(cmd *cobra.Command, args []string) error { return m.runValidate(args) },
	}
}

func (m *Main) runValidate(files []string) error {
	var problems []error
	cfg, path, readErr := m.readConfig()
	// After problems at keys of the file, the rest of the configuration is
	// usable: its values are checked too, but for the keys that had a
	// problem (they hold the defaults it left), so that every problem is
	// said at once; and the specs are found and read.
	usable := readErr == nil || allConfigErrors(config.Errors(readErr))
	err := readErr
	if err == nil {
		err = cfg.Validate()
	} else if usable {
		err = errors.Join(append(config.Errors(readErr), valuesBesides(cfg.Validate(), config.Errors(readErr))...)...)
	}
	problems = append(problems, config.Errors(err)...)
	var command []error
	if usable {
		command = m.agentCommandProblems(cfg, path, config.Errors(err))
		problems = append(problems, command...)
	}
	name := path
	if name == "" {
		name = "(defaults)"
	}
	if err == nil && len(command) == 0 {
		fmt.Fprintf(m.Stdout, "config %s: ok\n", name)
	}

	if usable && (cfg.Specs.Dir != "" || len(files) > 0) {
		where := cfg.Specs.Dir
		var list []specs.Spec
		var err error
		if len(files) > 0 {
			where = strings.Join(files, ", ")
			list, err = loadSpecFiles(m, files)
		} else {
			list, err = specs.LoadDir(cfg.Specs.Dir)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist) && cfg.Line("specs.dir") == 0 && len(files) == 0:
			fmt.Fprintf(m.Stdout, "specs %s: none (no such directory)\n", cfg.Specs.Dir)
		case err != nil:
			var es specs.Errors
			if errors.As(err, &es) {
				for _, e := range es {
					problems = append(problems, e)
				}
			} else {
				problems = append(problems, &config.Error{File: path, Line: cfg.Line("specs.dir"), Key: "specs.dir", Err: err})
			}
		}
		against := checkSpecsAgainst(cfg, list)
		if len(files) == 0 {
			names := make([]string, len(list))
			for i, s := range list {
				names[i] = s.Name
			}
			against = append(against, config.Errors(triggerRepoSpecProblems(cfg, path, names))...) // triggers.go
		}
		problems = append(problems, against...)
		if err == nil && len(against) == 0 {
			names := make([]string, len(list))
			for i, s := range list {
				names[i] = s.Name
			}
			fmt.Fprintf(m.Stdout, "specs %s: %d ok", where, len(list))
			if len(names) > 0 {
				fmt.Fprintf(m.Stdout, " (%s)", strings.Join(names, ", "))
			}
			fmt.Fprintln(m.Stdout)
		}
	}

	if len(problems) == 0 {
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(m.Stderr, p)
	}
	word := "problems"
	if len(problems) == 1 {
		word = "problem"
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("%d %s found", len(problems), word)}
}

// agentCommandProblems reports an agent.command that runs would not find
// (executor.LookCommand), at its key, file and line. Only a command set in
// the file is a problem: the default ("claude") not found is a warning, so
// that validate passes where the CLI is not installed (a CI job checking
// the specs). Nothing is said when agent.command already has a problem.
func (m *Main) agentCommandProblems(cfg config.Config, path string, found []error) []error {
	for _, e := range found {
		var ce *config.Error
		if errors.As(e, &ce) && ce.Key == "agent.command" {
			return nil
		}
	}
	name := strings.TrimSpace(cfg.Agent.Command)
	if name == "" {
		return nil
	}
	if strings.ContainsRune(name, filepath.Separator) {
		name = m.path(name)
	}
	var env []string
	if p, ok := cfg.Agent.Env["PATH"]; ok {
		env = []string{"PATH=" + p}
	}
	if _, err := executor.LookCommand(name, env); err != nil {
		if cfg.Line("agent.command") == 0 {
			fmt.Fprintf(m.Stderr, "warning: agent.command (default %q): the agent CLI is not found (%v): runs will fail until it is installed or agent.command is set\n", cfg.Agent.Command, err)
			return nil
		}
		return []error{&config.Error{File: path, Line: cfg.Line("agent.command"), Key: "agent.command",
			Err: fmt.Errorf("the agent CLI is not found: %w", err)}}
	}
	return nil
}

// checkSpecsAgainst checks what a spec needs from the configuration: the
// surfaces it asks on are enabled, escalation has reminders to follow.
func checkSpecsAgainst(cfg config.Config, list []specs.Spec) []error {
	enabled := map[string]bool{}
	for _, name := range enabledSurfaces(cfg) {
		enabled[name] = true
	}
	var problems []error
	bad := func(sp specs.Spec, key, format string, args ...any) {
		problems = append(problems, &specs.Error{File: sp.Path, Line: sp.Line(key), Key: key, Err: fmt.Errorf(format, args...)})
	}
	for _, sp := range list {
		problems = append(problems, specRefusals(cfg, sp)...)
		problems = append(problems, specFileProblems(sp)...)
		names := make([]string, 0, len(sp.Surfaces))
		for _, s := range sp.Surfaces {
			names = append(names, s.Name)
		}
		if len(sp.Surfaces) == 0 {
			names = enabledSurfaces(cfg)
			if len(names) == 0 {
				bad(sp, "surfaces", "names no surface and none is enabled in the configuration: nobody could answer its questions")
			}
		}
		for _, n := range names {
			if !enabled[n] {
				bad(sp, "surfaces", "asks on %s, which is not enabled in the configuration (surfaces.%s.enabled)", n, n)
			}
		}
		if sp.EscalateTo != "" {
			if !enabled[sp.EscalateTo] {
				bad(sp, "escalate_to", "escalates to %s, which is not enabled in the configuration (surfaces.%s.enabled)", sp.EscalateTo, sp.EscalateTo)
			}
			if sp.RemindEvery == 0 {
				bad(sp, "escalate_to", "escalation happens when a reminder goes unanswered: set remind_every")
			}
		}
	}
	return problems
}

// specRefusals are the reasons the configuration refuses to run a spec at
// all: a schedule firing more often than serve.min_schedule_interval, and
// permission_mode bypassPermissions without the configuration's
// dangerously_skip_permissions.
func specRefusals(cfg config.Config, sp specs.Spec) []error {
	var out []error
	if err := sp.CheckInterval(cfg.Serve.ScheduleFloor(), "serve.min_schedule_interval"); err != nil {
		out = append(out, err)
	}
	if err := bypassRefusal(cfg, sp); err != nil {
		out = append(out, err)
	}
	if err := notifySecretRefusal(cfg, sp); err != nil { // notify.go
		out = append(out, err)
	}
	return out
}

// bypassRefusal refuses a spec's permission_mode bypassPermissions unless
// the configuration opts in with agent.dangerously_skip_permissions.
func bypassRefusal(cfg config.Config, sp specs.Spec) error {
	if sp.Agent.PermissionMode != config.BypassPermissions || cfg.Agent.DangerouslySkipPermissions {
		return nil
	}
	return &specs.Error{File: sp.Path, Line: sp.Line("permission_mode"), Key: "permission_mode",
		Err: errors.New(config.BypassPermissions + " skips every permission check: it needs agent.dangerously_skip_permissions: true in the configuration")}
}

// loadSpecFiles loads the spec files named on the command line; the
// problems of all of them are returned together, as specs.LoadDir does.
func loadSpecFiles(m *Main, files []string) ([]specs.Spec, error) {
	var (
		list []specs.Spec
		errs specs.Errors
	)
	for _, f := range files {
		sp, err := specs.Load(m.path(f))
		var es specs.Errors
		switch {
		case errors.As(err, &es):
			errs = append(errs, es...)
		case err != nil:
			errs = append(errs, &specs.Error{File: f, Err: err})
		default:
			list = append(list, sp)
		}
	}
	return list, errs.Err()
}

// specFileProblems checks the files a spec names: its workdir is a
// directory, its mcp_config a JSON file that can be read.
func specFileProblems(sp specs.Spec) []error {
	var out []error
	bad := func(key string, err error) {
		out = append(out, &specs.Error{File: sp.Path, Line: sp.Line(key), Key: key, Err: err})
	}
	if sp.WorkDir != "" {
		if fi, err := os.Stat(sp.WorkDir); err != nil {
			bad("workdir", fmt.Errorf("%s: %w", sp.WorkDir, errors.Unwrap(err)))
		} else if !fi.IsDir() {
			bad("workdir", fmt.Errorf("%s is not a directory", sp.WorkDir))
		}
	}
	if sp.Agent.MCPConfig != "" {
		data, err := os.ReadFile(sp.Agent.MCPConfig)
		var doc struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		switch {
		case err != nil:
			bad("mcp_config", fmt.Errorf("%s: %w", sp.Agent.MCPConfig, errors.Unwrap(err)))
		case json.Unmarshal(data, &doc) != nil:
			bad("mcp_config", fmt.Errorf("%s is not a JSON document such as {\"mcpServers\": {...}}", sp.Agent.MCPConfig))
		}
	}
	return out
}

// valuesBesides are the problems of Validate's err but those at, above or
// under a key that had a problem when the file was read.
func valuesBesides(err error, read []error) []error {
	var bad []string
	for _, e := range read {
		var ce *config.Error
		if errors.As(e, &ce) && ce.Key != "" {
			bad = append(bad, ce.Key)
		}
	}
	var out []error
	for _, e := range config.Errors(err) {
		var ce *config.Error
		if errors.As(e, &ce) && slices.ContainsFunc(bad, func(k string) bool {
			return ce.Key == k || strings.HasPrefix(ce.Key, k+".") || strings.HasPrefix(k, ce.Key+".") ||
				strings.HasPrefix(ce.Key, k+"[") || strings.HasPrefix(k, ce.Key+"[")
		}) {
			continue
		}
		out = append(out, e)
	}
	return out
}
