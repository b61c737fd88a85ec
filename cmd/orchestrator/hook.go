package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/approvals/gate"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// maxHookInput caps what the hook reads from the CLI.
const maxHookInput = 4 << 20

func (m *Main) newHookCmd() *cobra.Command {
	var stateDir, runID string
	var driver int
	var fence int64
	var post bool
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
			if post {
				return m.runPostHook(ctx, stateDir, runID, fence)
			}
			return m.runHook(ctx, stateDir, runID, fence)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", "", "the orchestrator's state directory")
	cmd.Flags().StringVar(&runID, "run", "", "the run the CLI works for")
	cmd.Flags().IntVar(&driver, "driver", 0, "the process ID of the orchestrator that started the CLI: once it is gone, no decision is handed out")
	cmd.Flags().Int64Var(&fence, "fence", 0, "the fencing token of the drive that started the CLI (0: none)")
	cmd.Flags().BoolVar(&post, "post", false, "run as the PostToolUse hook: record that the call has its result")
	_ = cmd.MarkFlagRequired("state")
	_ = cmd.MarkFlagRequired("run")
	return cmd
}

func (m *Main) runHook(ctx context.Context, stateDir, runID string, fence int64) error {
	v, err := m.hookVerdict(ctx, stateDir, runID, fence)
	if err != nil {
		// The call must not run on an error: it is refused, and the model
		// is told why.
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
		v = gate.Verdict{Decision: gate.HookDeny, Reason: "the orchestrator could not decide this call: " + err.Error()}
	}
	_, werr := m.Stdout.Write(v.JSON())
	return werr
}

func (m *Main) hookVerdict(ctx context.Context, stateDir, runID string, fence int64) (gate.Verdict, error) {
	b, err := readHookInput(m.Stdin)
	if err != nil {
		return gate.Verdict{}, err
	}
	in, err := gate.ParseHookInput(b)
	if err != nil {
		return gate.Verdict{}, err
	}
	st, err := openHookStore(ctx, stateDir, runID)
	if err != nil {
		return gate.Verdict{}, err
	}
	defer st.Close()
	if fence != 0 {
		// A CLI whose drive was fenced out (another instance took the run
		// over) runs nothing more; its guard stops it (fence.go).
		if err := st.CheckFence(ctx, runID, fence); errors.Is(err, store.ErrLeaseLost) {
			return fencedOut(err), nil
		} else if err != nil {
			return gate.Verdict{}, err
		}
	}
	v, err := gate.Hook(ctx, st, runID, in)
	if err != nil || fence == 0 || (v.Decision != "" && v.Decision != gate.HookAllow) {
		return v, err
	}
	// The call runs: that it started is recorded first, with the drive's
	// fencing token, and the session as it stands (the prompt, this call)
	// is saved with it, so that an instance taking the turn over knows.
	again, err := st.ToolCallStarted(ctx, runID, in.ToolUseID, in.ToolName, callSummary(in.ToolInput), fence)
	if errors.Is(err, store.ErrLeaseLost) {
		return fencedOut(err), nil
	}
	if err != nil {
		return gate.Verdict{}, err
	}
	if again {
		return gate.Verdict{Decision: gate.HookDeny, Reason: startedBefore}, nil
	}
	if err := saveHookSession(ctx, st, runID, fence, b); err != nil {
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
	}
	return v, nil
}

// startedBefore is the reason a call is refused when an earlier process of
// the session started it: its outcome is unknown, and it never runs twice.
const startedBefore = "an earlier process of this session started this call and stopped before its result was recorded; its outcome is unknown and the orchestrator does not run it twice: check its effect before trying again"

// fencedOut is the refusal of a call from a CLI whose drive lost the run.
func fencedOut(err error) gate.Verdict {
	return gate.Verdict{Decision: gate.HookDeny,
		Reason: "this agent process no longer drives the run (another orchestrator instance took it over); the call was not run: " + err.Error()}
}

// runPostHook is the PostToolUse hook: the call has its result, which is
// recorded with the session as it stands. It prints no decision.
func (m *Main) runPostHook(ctx context.Context, stateDir, runID string, fence int64) error {
	b, err := readHookInput(m.Stdin)
	if err != nil {
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
		return nil
	}
	var in struct {
		ToolUseID    string          `json:"tool_use_id"`
		ToolResponse json.RawMessage `json:"tool_response"`
	}
	if err := json.Unmarshal(b, &in); err != nil || in.ToolUseID == "" {
		fmt.Fprintf(m.Stderr, "orchestrator hook: PostToolUse input without a tool_use_id\n")
		return nil
	}
	st, err := openHookStore(ctx, stateDir, runID)
	if err != nil {
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
		return nil
	}
	defer st.Close()
	if err := st.ToolCallFinished(ctx, runID, in.ToolUseID, toolOutput(in.ToolResponse)); err != nil {
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
	}
	if err := saveHookSession(ctx, st, runID, fence, b); err != nil {
		fmt.Fprintf(m.Stderr, "orchestrator hook: %v\n", err)
	}
	return nil
}

// toolOutput is a tool's response as PostToolUse gives it, as text: a
// string as is, Bash's {stdout, stderr} as their text, anything else as
// its JSON.
func toolOutput(resp json.RawMessage) string {
	var str string
	if json.Unmarshal(resp, &str) == nil {
		return str
	}
	var sh struct {
		Stdout *string `json:"stdout"`
		Stderr string  `json:"stderr"`
	}
	if json.Unmarshal(resp, &sh) == nil && sh.Stdout != nil {
		return strings.TrimRight(*sh.Stdout+"\n"+sh.Stderr, "\n")
	}
	return string(resp)
}

// readHookInput reads the CLI's hook input, at most maxHookInput bytes.
func readHookInput(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxHookInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook input: %w", err)
	}
	if len(b) > maxHookInput {
		return nil, fmt.Errorf("hook input over %d bytes", maxHookInput)
	}
	return b, nil
}

// openHookStore opens the store of stateDir for the hook, and checks that
// run runID is in it.
func openHookStore(ctx context.Context, stateDir, runID string) (*store.Store, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("--state %q is not an absolute path", stateDir)
	}
	dbURL, err := readHookDatabaseURL(stateDir)
	if err != nil {
		return nil, err
	}
	if dbURL == "" {
		if _, err := os.Stat(filepath.Join(stateDir, store.FileName)); err != nil {
			return nil, fmt.Errorf("no orchestrator state in %s: %w", stateDir, err)
		}
	}
	st, err := store.OpenDatabase(ctx, stateDir, dbURL)
	if err != nil {
		return nil, err
	}
	if _, err := st.Run(ctx, runID); err != nil {
		st.Close()
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("run %s is not in %s", runID, stateDir)
		}
		return nil, err
	}
	return st, nil
}

// saveHookSession saves the CLI's session file named by the hook's input
// (transcript_path, session_id) to the store, whole lines only, with the
// drive's fencing token. Shared stores only: elsewhere the file stays
// where the next turn finds it.
func saveHookSession(ctx context.Context, st *store.Store, runID string, fence int64, input []byte) error {
	if !st.Shared() || fence == 0 {
		return nil
	}
	var in struct {
		SessionID      string `json:"session_id"`
		TranscriptPath string `json:"transcript_path"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.SessionID == "" || !filepath.IsAbs(in.TranscriptPath) ||
		filepath.Ext(in.TranscriptPath) != ".jsonl" {
		return nil // nothing to save that is the CLI's session file
	}
	content, err := os.ReadFile(in.TranscriptPath)
	if err != nil {
		return fmt.Errorf("save the session before a tool call: %w", err)
	}
	content = content[:bytes.LastIndexByte(content, '\n')+1]
	if len(content) == 0 {
		return nil
	}
	return st.SaveSession(store.WithFence(ctx, runID, fence), runID, in.SessionID, content)
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
// with a timeout (seconds) longer than the hold. With a fencing token (a
// drive that holds the run's lock, fence.go) the hook carries it; with post
// too (a shared store, where another instance may take the turn over) a
// PostToolUse hook records each call's output.
func hookSettings(prefix, stateDir, runID string, holdSeconds, driver int, fence int64, post bool) string {
	cmd := prefix + " hook --state " + shQuote(stateDir) + " --run " + shQuote(runID)
	if driver > 0 {
		cmd += fmt.Sprintf(" --driver %d", driver)
	}
	if fence != 0 {
		cmd += " --fence " + strconv.FormatInt(fence, 10)
	}
	hooks := map[string]any{"PreToolUse": []any{map[string]any{
		"matcher": "*",
		"hooks":   []any{map[string]any{"type": "command", "command": cmd, "timeout": holdSeconds + 60}},
	}}}
	if fence != 0 && post {
		hooks["PostToolUse"] = []any{map[string]any{
			"matcher": "*",
			"hooks":   []any{map[string]any{"type": "command", "command": cmd + " --post", "timeout": 60}},
		}}
	}
	b, _ := json.Marshal(map[string]any{"hooks": hooks})
	return string(b)
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
