package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Harness names the agent CLI's output protocol.
const (
	HarnessClaude = "claude" // --output-format stream-json --verbose (the default)
	HarnessClaw   = "claw"   // --output-format json: one envelope at the end (docs/claude-cli.md)
)

// Defaults applied by New to zero fields.
const (
	DefaultCommand     = "claude"
	DefaultResultGrace = 5 * time.Second
	DefaultKillGrace   = 5 * time.Second
	DefaultStderrLimit = 64 << 10
)

// MCPConfigPlaceholder stands in Args for the temporary file Start writes
// Config.MCPServers to.
const MCPConfigPlaceholder = "<mcp-config-file>"

// Config configures an Executor. Zero fields get the defaults above; a zero
// Timeout or IdleTimeout means none.
type Config struct {
	// Command is the CLI to run: a name looked up in PATH (the child's PATH
	// when Env sets one) or a path. Default "claude".
	Command string
	// Harness is HarnessClaude (default) or HarnessClaw.
	Harness string

	Model           string
	AllowedTools    []string // passed one argv element each, never re-quoted: "Bash(go test:*)" stays intact
	DisallowedTools []string
	PermissionMode  string // acceptEdits, plan, dontAsk, …
	// MCPConfig is the path of an MCP config file ({"mcpServers":{…}}).
	MCPConfig string
	// MCPServers, when set, are written as {"mcpServers": MCPServers} to a
	// 0600 temporary file for each run (removed after it) and passed with
	// --mcp-config, so their secrets never appear on a command line.
	MCPServers      map[string]any
	StrictMCPConfig bool
	MaxTurns        int
	// AppendSystemPrompt is sent on every call, --resume included (the
	// CLI does not remember it).
	AppendSystemPrompt string
	// DangerouslySkipPermissions adds --dangerously-skip-permissions. Only
	// ever by explicit opt-in. (As root the CLI also wants IS_SANDBOX=1.)
	DangerouslySkipPermissions bool

	// ControlProtocol drives the CLI in its bidirectional mode
	// (--input-format stream-json --permission-prompt-tool stdio, claude
	// harness only): the prompt is a user message on stdin, stdin stays open
	// for the turn and is closed after the result line, and the CLI's
	// control_request lines (permission requests, AskUserQuestion) are
	// answered on stdin (control.go, docs/claude-cli.md). AskUserQuestion
	// exists only in this mode, so a session started in it is resumed in it.
	ControlProtocol bool
	// Settings is passed with --settings (a file path or a JSON object): the
	// orchestrator's PreToolUse hook is installed this way.
	Settings string

	// Env holds extra variables for the child; they override inherited
	// ones. See Environ for what is inherited.
	Env map[string]string
	// DropEnv names more variables not to inherit; a trailing "*" makes a
	// prefix ("MYCORP_*").
	DropEnv []string
	// PassEnv names inherited variables that look like secrets (see
	// SecretLike) and are passed on all the same; a trailing "*" makes a
	// prefix ("AWS_*"). DropEnv and the orchestrator's own variables still
	// win.
	PassEnv []string
	// BaseEnv replaces os.Environ() as the inherited environment (tests).
	BaseEnv []string
	// Secrets are values the child never gets, whatever the variable
	// carrying them is called: an inherited variable or an entry of Env
	// whose value equals one, or contains one of at least MinSecretLen
	// bytes, is left out (the orchestrator's tokens, webhook secrets, the
	// database URL and its password). PassEnv does not bring them back.
	Secrets []string

	// Timeout bounds a whole run (CategoryTimeout); IdleTimeout bounds a
	// stretch without any output while the caller waits in Next
	// (CategoryIdleTimeout; not applied to the claw harness, which prints
	// only at the end).
	Timeout     time.Duration
	IdleTimeout time.Duration
	// ResultGrace is how long the CLI may keep running after its result
	// line before it is stopped. KillGrace is the time between the
	// interrupt and the kill, and how long the stream may stay open after
	// the process ended (a descendant holding it). Negative: no grace.
	ResultGrace time.Duration
	KillGrace   time.Duration

	MaxLineBytes int // default DefaultMaxLineBytes (64 MiB)
	StderrLimit  int // bytes of stderr kept, head and tail; default 64 KiB

	// TranscriptDir receives the raw output of runs whose Request has no
	// TranscriptPath. Empty: such runs are not saved.
	TranscriptDir string

	Logger *slog.Logger
}

// Executor runs the agent CLI. It is safe for concurrent use: each Start
// makes an independent Process.
type Executor struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Executor, error) {
	if cfg.Command == "" {
		cfg.Command = DefaultCommand
	}
	switch cfg.Harness {
	case "":
		cfg.Harness = HarnessClaude
	case HarnessClaude, HarnessClaw:
	default:
		return nil, fmt.Errorf("executor config: harness %q: want %q or %q", cfg.Harness, HarnessClaude, HarnessClaw)
	}
	if cfg.ResultGrace == 0 {
		cfg.ResultGrace = DefaultResultGrace
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.ResultGrace < 0 {
		cfg.ResultGrace = 0
	}
	if cfg.KillGrace < 0 {
		cfg.KillGrace = 0
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.StderrLimit <= 0 {
		cfg.StderrLimit = DefaultStderrLimit
	}
	if cfg.ControlProtocol && cfg.Harness == HarnessClaw {
		return nil, errors.New("executor config: the control protocol is the claude harness's; claw keeps its own mode")
	}
	if strings.HasPrefix(cfg.Settings, "-") {
		return nil, fmt.Errorf("executor config: settings %q starts with '-'", cfg.Settings)
	}
	if cfg.MaxTurns < 0 {
		return nil, fmt.Errorf("executor config: max turns %d is negative", cfg.MaxTurns)
	}
	if cfg.Timeout < 0 || cfg.IdleTimeout < 0 {
		return nil, errors.New("executor config: negative timeout")
	}
	for _, list := range [][]string{cfg.AllowedTools, cfg.DisallowedTools} {
		for _, t := range list {
			if t == "" || strings.HasPrefix(t, "-") {
				return nil, fmt.Errorf("executor config: tool %q: empty or starts with '-'", t)
			}
		}
	}
	if cfg.MCPConfig != "" && strings.HasPrefix(cfg.MCPConfig, "-") {
		return nil, fmt.Errorf("executor config: mcp config path %q starts with '-'", cfg.MCPConfig)
	}
	for k := range cfg.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("executor config: env name %q is invalid", k)
		}
	}
	for _, k := range cfg.PassEnv {
		if k == "" || k == "*" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("executor config: pass env name %q is invalid", k)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg, log: cfg.Logger}, nil
}

// Config returns the configuration with defaults filled in.
func (e *Executor) Config() Config { return e.cfg }

// MaxArgPrompt is the longest prompt passed as a command-line argument
// (claude harness). A longer one is written to the CLI's stdin, which `claude
// -p` reads as the prompt when no prompt argument is given: Linux refuses a
// single argument over 128 KiB (MAX_ARG_STRLEN) with "argument list too
// long" (docs/claude-cli.md).
const MaxArgPrompt = 64 << 10

// Request is one call of the CLI.
type Request struct {
	// Prompt is required. It goes after "--", so a prompt starting with
	// "-" is not read as a flag; one over MaxArgPrompt bytes goes on stdin
	// instead (claude harness). With Config.ControlProtocol it is a user
	// message on stdin, and it may be empty when Resume is set: the resumed
	// session goes on from where it stopped (a deferred tool call fires the
	// PreToolUse hook again).
	Prompt string
	// Resume continues a session (--resume); SessionID fixes the id of a
	// new one (--session-id, a UUID). At most one of them.
	Resume    string
	SessionID string
	// WorkDir is the CLI's working directory (default: the current one).
	WorkDir string
	// TranscriptPath is where the raw output is saved as it streams
	// (default: a new file under Config.TranscriptDir, if set).
	TranscriptPath string
	// CanUseTool answers the CLI's can_use_tool requests (Config.
	// ControlProtocol). It is called on a goroutine of its own for each
	// request, with a context that ends when the CLI cancels the request or
	// the process ends; what it returns is sent to the CLI. When nil, the
	// caller answers with Process.Respond after Next yields the
	// *ControlRequest.
	CanUseTool func(ctx context.Context, req *ControlRequest) Permission
	// MaxTurns, when above zero, is passed as --max-turns instead of
	// Config.MaxTurns (a run raised its limit).
	MaxTurns int
	// MaxBudgetUSD, when above zero, is passed as --max-budget-usd: what
	// the turn may spend (claude harness).
	MaxBudgetUSD float64
}

func (e *Executor) validate(req Request) error {
	if strings.TrimSpace(req.Prompt) == "" && !(e.cfg.ControlProtocol && req.Resume != "" && req.Prompt == "") {
		return errors.New("executor request: empty prompt")
	}
	if strings.ContainsRune(req.Prompt, 0) {
		return errors.New("executor request: prompt contains a NUL byte")
	}
	if req.Resume != "" && req.SessionID != "" {
		return errors.New("executor request: both resume and session id set")
	}
	for name, v := range map[string]string{"resume": req.Resume, "session id": req.SessionID} {
		if strings.HasPrefix(v, "-") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("executor request: %s %q is not a session id", name, v)
		}
	}
	if req.WorkDir != "" {
		fi, err := os.Stat(req.WorkDir)
		if err != nil {
			return fmt.Errorf("executor request: work dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("executor request: work dir %s is not a directory", req.WorkDir)
		}
	}
	return nil
}

// Args returns the CLI's arguments (without the command) for req. When
// Config.MCPServers is set, the temporary file's path shows as
// MCPConfigPlaceholder.
func (e *Executor) Args(req Request) []string {
	return e.args(req, MCPConfigPlaceholder)
}

func (e *Executor) args(req Request, mcpTemp string) []string {
	c := &e.cfg
	if c.Harness == HarnessClaw {
		return e.clawArgs(req)
	}
	a := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if c.Model != "" {
		a = append(a, "--model", c.Model)
	}
	if c.PermissionMode != "" {
		a = append(a, "--permission-mode", c.PermissionMode)
	}
	if req.MaxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(req.MaxTurns))
	} else if c.MaxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(c.MaxTurns))
	}
	if req.MaxBudgetUSD > 0 {
		a = append(a, "--max-budget-usd", strconv.FormatFloat(req.MaxBudgetUSD, 'f', -1, 64))
	}
	if req.Resume != "" {
		a = append(a, "--resume", req.Resume)
	}
	if req.SessionID != "" {
		a = append(a, "--session-id", req.SessionID)
	}
	if c.MCPConfig != "" {
		a = append(a, "--mcp-config", c.MCPConfig)
	}
	if len(c.MCPServers) > 0 {
		a = append(a, "--mcp-config", mcpTemp)
	}
	if c.StrictMCPConfig {
		a = append(a, "--strict-mcp-config")
	}
	if len(c.AllowedTools) > 0 {
		a = append(a, "--allowedTools")
		a = append(a, c.AllowedTools...)
	}
	if len(c.DisallowedTools) > 0 {
		a = append(a, "--disallowedTools")
		a = append(a, c.DisallowedTools...)
	}
	if c.AppendSystemPrompt != "" {
		a = append(a, "--append-system-prompt", c.AppendSystemPrompt)
	}
	if c.DangerouslySkipPermissions {
		a = append(a, "--dangerously-skip-permissions")
	}
	if c.Settings != "" {
		a = append(a, "--settings", c.Settings)
	}
	if c.ControlProtocol {
		// The prompt is a user message on stdin (control.go).
		return append(a, "--input-format", "stream-json", "--permission-prompt-tool", "stdio")
	}
	if promptOnStdin(c, req) {
		return a // the prompt goes on stdin
	}
	return append(a, "--", req.Prompt)
}

// promptOnStdin says whether req's prompt is written to the CLI's stdin
// rather than passed as an argument (see MaxArgPrompt).
func promptOnStdin(c *Config, req Request) bool {
	return c.Harness != HarnessClaw && !c.ControlProtocol && len(req.Prompt) > MaxArgPrompt
}

// clawArgs follows claw's global flags (its documentation): one
// envelope on stdout; the prompt goes last with -p. claw resumes from a
// session file path given to --resume. These arguments are written from
// claw's documentation, not verified against a claw binary.
func (e *Executor) clawArgs(req Request) []string {
	c := &e.cfg
	a := []string{"--output-format", "json"}
	if c.Model != "" {
		a = append(a, "--model", c.Model)
	}
	if c.PermissionMode != "" {
		a = append(a, "--permission-mode", c.PermissionMode)
	}
	if len(c.AllowedTools) > 0 {
		a = append(a, "--allowedTools", strings.Join(c.AllowedTools, ","))
	}
	if c.DangerouslySkipPermissions {
		a = append(a, "--dangerously-skip-permissions")
	}
	if req.Resume != "" {
		a = append(a, "--resume", req.Resume)
	}
	return append(a, "-p", req.Prompt)
}

// droppedEnv are never inherited: the markers that make the CLI refuse to
// start as a nested session.
var droppedEnv = []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"}

// droppedEnvPrefixes are the orchestrator's own credentials (GitHub,
// Discord, Slack: GH_TOKEN, GITHUB_TOKEN, GH_ENTERPRISE_TOKEN, a gh config
// dir...) and settings; they are not the agent's.
var droppedEnvPrefixes = []string{"GITHUB_", "GH_", "DISCORD_", "SLACK_", "ORCHESTRATOR_"}

// MinSecretLen is the least length of a secret (Config.Secrets) looked for
// inside other values; a shorter one is only matched whole.
const MinSecretLen = 8

// Environ returns the child's environment, built on purpose: the inherited
// environment (Config.BaseEnv, or os.Environ()) without CLAUDECODE,
// CLAUDE_CODE_ENTRYPOINT, anything starting with GITHUB_, GH_, DISCORD_,
// SLACK_ or ORCHESTRATOR_ (the orchestrator's own tokens), the names in
// Config.DropEnv, and the variables that look like secrets (SecretLike)
// unless Config.PassEnv lists them; ANTHROPIC_*, CLAUDE_CODE_*, DISABLE_*
// and the rest pass through; then Config.Env, which wins. Whatever holds
// one of Config.Secrets is left out, inherited or from Config.Env. The
// result is sorted by name.
func (e *Executor) Environ() []string {
	base := e.cfg.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	env := make(map[string]string, len(base)+len(e.cfg.Env))
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || e.dropped(k) || e.holdsSecret(v) {
			continue
		}
		env[k] = v
	}
	for k, v := range e.cfg.Env {
		if e.holdsSecret(v) {
			// validate refuses agent.env holding one; a spec's env may.
			e.log.Warn("agent env: left out a variable holding one of the orchestrator's secrets", "name", k)
			delete(env, k)
			continue
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// holdsSecret reports whether v is, or holds, one of Config.Secrets.
func (e *Executor) holdsSecret(v string) bool {
	for _, s := range e.cfg.Secrets {
		if s != "" && (v == s || (len(s) >= MinSecretLen && strings.Contains(v, s))) {
			return true
		}
	}
	return false
}

func (e *Executor) dropped(name string) bool {
	for _, d := range droppedEnv {
		if name == d {
			return true
		}
	}
	for _, p := range droppedEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	if matchesAny(name, e.cfg.DropEnv) {
		return true
	}
	return SecretLike(name) && !matchesAny(name, e.cfg.PassEnv)
}

// matchesAny says whether name is in list, where an entry ending in "*" is
// a prefix.
func matchesAny(name string, list []string) bool {
	for _, d := range list {
		if p, ok := strings.CutSuffix(d, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == d {
			return true
		}
	}
	return false
}

// agentCredentials are the CLI's own credentials: they look like secrets
// and are inherited all the same.
var agentCredentials = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// awsCredentials are the AWS credential variables without a secret-looking
// name of their own.
var awsCredentials = []string{"AWS_ACCESS_KEY_ID"}

// SecretLike says whether an environment variable's name looks like it
// holds a secret, compared in upper case: it ends in _TOKEN, _KEY or
// PASSWORD (PGPASSWORD), holds _SECRET, _PASSWORD or CREDENTIAL, starts
// with TOKEN, SECRET or PASSWORD, or is AWS_ACCESS_KEY_ID. The CLI's own credentials (ANTHROPIC_API_KEY,
// ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN) are not secret-like: the
// agent needs them.
func SecretLike(name string) bool {
	for _, c := range agentCredentials {
		if name == c {
			return false
		}
	}
	n := strings.ToUpper(name)
	for _, c := range awsCredentials {
		if n == c {
			return true
		}
	}
	switch {
	case strings.HasSuffix(n, "_TOKEN"), strings.HasSuffix(n, "_KEY"), strings.HasSuffix(n, "PASSWORD"),
		strings.Contains(n, "_SECRET"), strings.Contains(n, "_PASSWORD"), strings.Contains(n, "CREDENTIAL"),
		strings.HasPrefix(n, "TOKEN"), strings.HasPrefix(n, "SECRET"), strings.HasPrefix(n, "PASSWORD"):
		return true
	}
	return false
}

// envValue returns a variable of the child's environment.
func envValue(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
