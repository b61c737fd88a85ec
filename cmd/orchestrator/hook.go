package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// maxHookInput caps what the hook reads from the CLI.
const maxHookInput = 4 << 20

func (m *Main) newHookCmd() *cobra.Command {
	var stateDir, runID string
	var driver int
	cmd := &cobra.Command{
		Use:   "hook --state DIR --run RUN",
		Short: "The PreToolUse hook the agent CLI runs for each tool call (not for people)",
		Long: `hook is what the orchestrator installs in the agent CLI (--settings) as its
PreToolUse hook. It reads the call from stdin and prints the decision for its
tool_use_id: the one stored (a person's answer, handed out exactly once), the
policy's (approvals: allow, deny, ask), or, once a person is asked, their answer
within approval_hold; past it the call is deferred and the run waits with no
process. An error is a refusal with the reason, never a silent allow.`,
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(),
		Hidden:      true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if driver > 0 {
				var stop func()
				ctx, stop = whileAlive(ctx, driver)
				defer stop()
			}
			return m.runHook(ctx, stateDir, runID)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", "", "the orchestrator's state directory")
	cmd.Flags().StringVar(&runID, "run", "", "the run the CLI works for")
	cmd.Flags().IntVar(&driver, "driver", 0, "the process ID of the orchestrator that started the CLI: once it is gone, no decision is handed out")
	_ = cmd.MarkFlagRequired("state")
	_ = cmd.MarkFlagRequired("run")
	return cmd
}

func (m *Main) runHook(ctx context.Context, stateDir, runID string) error {
	v, err := m.hookVerdict(ctx, stateDir, runID)
	if err != nil {
		// The call must not run on an error: it is refused, and the model
		// is told why.
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
		v = approvals.Verdict{Decision: approvals.HookDeny, Reason: "the orchestrator could not decide this call: " + err.Error()}
	}
	_, werr := m.Stdout.Write(v.JSON())
	return werr
}

func (m *Main) hookVerdict(ctx context.Context, stateDir, runID string) (approvals.Verdict, error) {
	b, err := io.ReadAll(io.LimitReader(m.Stdin, maxHookInput+1))
	if err != nil {
		return approvals.Verdict{}, fmt.Errorf("read the hook input: %w", err)
	}
	if len(b) > maxHookInput {
		return approvals.Verdict{}, fmt.Errorf("hook input over %d bytes", maxHookInput)
	}
	in, err := approvals.ParseHookInput(b)
	if err != nil {
		return approvals.Verdict{}, err
	}
	if !filepath.IsAbs(stateDir) {
		return approvals.Verdict{}, fmt.Errorf("--state %q is not an absolute path", stateDir)
	}
	dbURL, err := readHookDatabaseURL(stateDir)
	if err != nil {
		return approvals.Verdict{}, err
	}
	if dbURL == "" {
		if _, err := os.Stat(filepath.Join(stateDir, store.FileName)); err != nil {
			return approvals.Verdict{}, fmt.Errorf("no orchestrator state in %s: %w", stateDir, err)
		}
	}
	st, err := store.OpenDatabase(ctx, stateDir, dbURL)
	if err != nil {
		return approvals.Verdict{}, err
	}
	defer st.Close()
	if _, err := st.Run(ctx, runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return approvals.Verdict{}, fmt.Errorf("run %s is not in %s", runID, stateDir)
		}
		return approvals.Verdict{}, err
	}
	return approvals.Hook(ctx, st, runID, in)
}

// hookDatabaseURLFile, in the state directory, holds the database_url of a
// store kept in PostgreSQL for the hook, which the agent CLI runs with an
// environment that has none of the orchestrator's settings (executor.Environ
// drops ORCHESTRATOR_*). It is readable by its owner only, like the SQLite
// database it stands in for; without it the hook opens that database.
const hookDatabaseURLFile = "database_url"

// writeHookDatabaseURL keeps the state directory's hookDatabaseURLFile in
// step with database_url: written (atomically) when set, removed when not.
func writeHookDatabaseURL(stateDir, dbURL string) error {
	path := filepath.Join(stateDir, hookDatabaseURLFile)
	if dbURL == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	if b, err := os.ReadFile(path); err == nil && string(b) == dbURL+"\n" {
		return nil
	}
	f, err := os.CreateTemp(stateDir, hookDatabaseURLFile+".new-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.WriteString(dbURL + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// readHookDatabaseURL returns the database_url the orchestrator left for
// the hook, "" when the store is the SQLite database.
func readHookDatabaseURL(stateDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, hookDatabaseURLFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("database_url of %s: %w", stateDir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// errDriverGone stops a hook whose orchestrator died: the CLI it holds dies
// with it, so a decision handed to it now would be used by nobody, and the
// call would never run (issue 20): the decision stays in the store for the
// run's next process, which has the model make the call again.
var errDriverGone = errors.New("the orchestrator that drives this run is gone")

// driverCheck is how often a holding hook checks that its orchestrator
// lives.
const driverCheck = 50 * time.Millisecond

// whileAlive is ctx, cancelled (errDriverGone) once process pid is gone.
func whileAlive(ctx context.Context, pid int) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if !processAlive(pid) {
		cancel(errDriverGone)
		return ctx, func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(driverCheck)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if !processAlive(pid) {
					cancel(errDriverGone)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// hookSettings is the --settings JSON that installs the orchestrator's hook
// for run: PREFIX hook --state DIR --run RUN --driver PID (prefix: the
// quoted program; PID: the orchestrator's, 0 for none), for every tool,
// with a timeout (seconds) longer than the hold.
func hookSettings(prefix, stateDir, runID string, holdSeconds, driver int) string {
	cmd := prefix + " hook --state " + shQuote(stateDir) + " --run " + shQuote(runID)
	if driver > 0 {
		cmd += fmt.Sprintf(" --driver %d", driver)
	}
	b, _ := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{
		"matcher": "*",
		"hooks":   []any{map[string]any{"type": "command", "command": cmd, "timeout": holdSeconds + 60}},
	}}}})
	return string(b)
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
