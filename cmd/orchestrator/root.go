package main

import (
	"github.com/spf13/cobra"
)

// skipConfig is the annotation of commands that run without loading the
// configuration (version), or load it themselves (validate).
const skipConfig = "orchestrator/skip-config"

func skipConfigAnnotation() map[string]string { return map[string]string{skipConfig: "true"} }

// noSurfaces is the annotation of commands that work on the store alone
// (status, answer, cancel): problems in the surfaces' configuration, such as
// an unset ${GITHUB_TOKEN}, do not stop them; the commands that build
// surfaces still report them.
const noSurfaces = "orchestrator/no-surfaces"

func noSurfacesAnnotation() map[string]string { return map[string]string{noSurfaces: "true"} }

// newRootCmd builds the command tree. Every command is listed here.
func (m *Main) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "orchestrator",
		Short: "Run a coding agent and route its questions to people",
		Long: `orchestrator runs a coding agent CLI (Claude Code) on a task. When the model
asks a question, orchestrator asks people on the terminal, GitHub or Discord
and resumes the session with their answer.

Configuration: --config FILE, else $ORCHESTRATOR_CONFIG, else ./orchestrator.yaml
when it exists, else the defaults. config.example.yaml documents every key.

Surfaces, where questions are asked (turned on under surfaces.NAME; a spec's
surfaces key or --surface picks among them):
` + surfacesHelp() + `
Exit codes:
` + exitCodesHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if needsConfig(cmd) {
				return m.loadConfig(cmd.Annotations[noSurfaces] == "")
			}
			return nil
		},
	}
	root.PersistentFlags().StringVar(&m.configFlag, "config", "", "configuration file (default $"+EnvConfig+", else ./"+DefaultConfigFile+" if it exists)")
	root.PersistentFlags().StringVar(&m.logLevelFlag, "log-level", "", "log level: debug, info, warn or error (overrides log.level)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })

	root.AddCommand(
		m.newVersionCmd(),
		m.newValidateCmd(),
		m.newInspectCmd(),
		m.newRunCmd(),
		m.newSubmitCmd(), // submit.go
		m.newResumeCmd(),
		m.newStatusCmd(),
		m.newAnswerCmd(),
		m.newCancelCmd(),
		m.newRehearseCmd(),
		m.newServeCmd(),
		m.newShowCmd(), // show.go
		m.newGCCmd(),   // gc.go
		m.newWebCmd(),
		m.newHookCmd(),   // hook.go
		m.newGuardCmd(),  // guard.go
		m.newInitCmd(),   // init.go
		m.newDoctorCmd(), // doctor.go
		m.newScheduleCmd(),
	)

	markRunning(root, &m.running)
	return root
}

// needsConfig reports whether cmd runs with the configuration loaded.
func needsConfig(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[skipConfig] != "" || c.Name() == "help" || c.Name() == "completion" {
			return false
		}
	}
	return cmd.Name() != cobra.ShellCompRequestCmd && cmd.Name() != cobra.ShellCompNoDescRequestCmd
}

// markRunning wraps the RunE of every command under c so that *running is
// set once one starts: errors before that (unknown command or flag, wrong
// arguments, missing required flag) are usage errors.
func markRunning(c *cobra.Command, running *bool) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*running = true
			return f(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRunning(sub, running)
	}
}
