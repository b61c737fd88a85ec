package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
)

func (m *Main) newRehearseCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "rehearse (SPEC.md | --prompt TEXT)",
		Short: "Run the whole loop with the real CLI and a built-in scripted model: no API key, no tokens",
		Long: `rehearse runs a spec or a prompt exactly as 'run' does — the real agent CLI,
the question protocol, your surfaces, the store — but the CLI talks to a
scripted model on 127.0.0.1 instead of the Anthropic API: it asks one question,
then finishes with the option you chose. Use it to see the orchestrator work
before spending tokens, or to check that a surface (GitHub, Discord, Slack) is set up.
Its state lives in a temporary directory that is removed afterwards.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 1 {
				spec = args[0]
			}
			return m.runRehearse(cmd.Context(), spec, f)
		},
	}
	cmd.Flags().StringVar(&f.prompt, "prompt", "", "the task, instead of a spec file")
	cmd.Flags().StringSliceVar(&f.surfaces, "surface", nil, "where to ask: "+surfaceNames("or")+" (repeatable)")
	cmd.Flags().StringVar(&f.workdir, "workdir", "", "the agent's working directory")
	cmd.Flags().BoolVar(&f.json, "json", false, "print progress as NDJSON events on stdout, see docs/json.md")
	return cmd
}

func (m *Main) runRehearse(ctx context.Context, specPath string, f runFlags) error {
	m.foreground()
	n, err := m.newRunFrom(specPath, f)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "orchestrator-rehearsal-")
	if err != nil {
		return err
	}
	m.OnClose(func() error { return os.RemoveAll(tmp) })
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if f.workdir == "" { // a rehearsal touches nothing of yours
		n.WorkDir = filepath.Join(tmp, "work")
		if err := os.MkdirAll(n.WorkDir, 0o700); err != nil {
			return err
		}
	}
	fake := fakeapi.NewRehearsal()
	base, err := fake.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("start the scripted model: %w", err)
	}
	m.OnClose(fake.Close)
	m.Config.StateDir = filepath.Join(tmp, "state")
	m.rehearsing = true
	var opts runOptions
	if err := json.Unmarshal(n.Options, &opts); err != nil {
		return err
	}
	opts.Env = fakeapi.OfflineEnv(base, home)
	if n.Options, err = json.Marshal(opts); err != nil {
		return err
	}
	if !f.json {
		fmt.Fprintf(m.Stdout, "Rehearsal: the real agent CLI (%s) against a scripted model on %s.\nNo API key is used and no tokens are spent.\n\n",
			m.Config.Agent.Command, base)
	}
	return m.startAndDrive(ctx, n, f.json)
}
