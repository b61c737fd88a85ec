package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the configuration and the spec files",
		Long: `validate reads the configuration and every spec file of specs.dir and prints
every problem found, each with its file, line and key. It exits with 2 when
there is any.`,
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(), // it reports config problems itself
		RunE:        func(cmd *cobra.Command, args []string) error { return m.runValidate() },
	}
}

func (m *Main) runValidate() error {
	var problems []error
	cfg, path, readErr := m.readConfig()
	// After a problem at a key of the file, the values are not checked
	// (they may be the defaults the problem left), but the rest of the
	// configuration is usable to find and read the specs.
	usable := readErr == nil || allConfigErrors(config.Errors(readErr))
	err := readErr
	if err == nil {
		err = cfg.Validate()
	}
	problems = append(problems, config.Errors(err)...)
	name := path
	if name == "" {
		name = "(defaults)"
	}
	if err == nil {
		fmt.Fprintf(m.Stdout, "config %s: ok\n", name)
	}

	if usable && cfg.Specs.Dir != "" {
		list, err := specs.LoadDir(cfg.Specs.Dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) && cfg.Line("specs.dir") == 0:
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
		problems = append(problems, against...)
		if err == nil && len(against) == 0 {
			names := make([]string, len(list))
			for i, s := range list {
				names[i] = s.Name
			}
			fmt.Fprintf(m.Stdout, "specs %s: %d ok", cfg.Specs.Dir, len(list))
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
