package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// Allowed values of the keys that take one of a few words.
var (
	LogLevels  = []string{"debug", "info", "warn", "error"}
	LogFormats = []string{"text", "json"}
	Harnesses  = []string{"claude", "claw"}
	// PermissionModes are those of the Claude Code CLI's --permission-mode
	// (2.1.330), and "default"; a spec's permission_mode takes the same.
	PermissionModes = []string{"default", "acceptEdits", "auto", "bypassPermissions", "dontAsk", "manual", "plan"}
	CatchUpModes    = []string{"skip", "once"}
)

// BypassPermissions is the permission mode that skips every check.
const BypassPermissions = "bypassPermissions"

// Validate checks c and returns every problem found, joined; each is an
// *Error naming the key, and the file and line when the key was set in a
// file. Errors lists them one by one.
func (c *Config) Validate() error {
	v := &validator{c: c}

	if c.StateDir == "" {
		v.add("state_dir", "required (set it, $XDG_STATE_HOME or $HOME)")
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		// The value is not shown: it may hold a password.
		v.add("database_url", "want empty (SQLite in state_dir) or a postgres:// URL")
	}
	v.oneOf("log.level", c.Log.Level, LogLevels)
	v.oneOf("log.format", c.Log.Format, LogFormats)

	a := c.Agent
	if strings.TrimSpace(a.Command) == "" {
		v.add("agent.command", "required")
	}
	v.oneOf("agent.harness", a.Harness, Harnesses)
	v.oneOf("agent.permission_mode", a.PermissionMode, PermissionModes)
	if a.PermissionMode == BypassPermissions && !a.DangerouslySkipPermissions {
		v.add("agent.permission_mode", "%s skips every permission check: it needs dangerously_skip_permissions: true as well", BypassPermissions)
	}
	v.nonEmptyItems("agent.allowed_tools", a.AllowedTools)
	v.nonEmptyItems("agent.disallowed_tools", a.DisallowedTools)
	v.nonNegative("agent.max_turns", int64(a.MaxTurns))
	if a.MaxCostUSD < 0 || math.IsInf(a.MaxCostUSD, 0) || math.IsNaN(a.MaxCostUSD) {
		v.add("agent.max_cost_usd", "must be a positive amount of dollars, or 0 for no limit")
	}
	v.nonNegative("agent.timeout", int64(a.Timeout))
	v.nonNegative("agent.idle_timeout", int64(a.IdleTimeout))
	if a.MaxLineBytes < 64<<10 {
		v.add("agent.max_line_bytes", "must be at least 64KiB, got %s", a.MaxLineBytes)
	}
	secrets := c.Secrets()
	for _, name := range sortedKeys(a.Env) {
		if !validEnvName(name) {
			v.add("agent.env."+name, "not a valid environment variable name")
		}
		// The value is not shown: it is a secret.
		if s, ok := HoldsSecret(a.Env[name], secrets); ok {
			v.add("agent.env."+name, "holds the value of %s: the agent must not get the orchestrator's credentials (they would let it answer its own questions or act as the orchestrator); give it credentials of its own", s.Key)
		}
	}
	for i, name := range a.PassEnv {
		if !validEnvName(strings.TrimSuffix(name, "*")) {
			v.add(fmt.Sprintf("agent.pass_env[%d]", i), "%q is not an environment variable name (or a prefix ending in *)", name)
		}
	}
	for _, name := range sortedKeys(a.MCPServers) {
		v.mcpServer("agent.mcp_servers."+name, name, a.MCPServers[name])
	}

	r := c.Run
	if r.MaxQuestionRounds < 1 {
		v.add("run.max_question_rounds", "must be at least 1, got %d", r.MaxQuestionRounds)
	}
	v.nonNegative("run.max_corrections", int64(r.MaxCorrections))
	v.nonNegative("run.rate_limit_retries", int64(r.RateLimitRetries))
	v.nonNegative("run.rate_limit_backoff", int64(r.RateLimitBackoff))
	if r.AnswerMaxBytes < 1 {
		v.add("run.answer_max_bytes", "must be at least 1, got %d", r.AnswerMaxBytes)
	}

	for _, name := range SurfaceNames() {
		if sc := c.Surfaces.Surface(name); sc.On() {
			prefix := "surfaces." + name + "."
			sc.Check(&Checker{add: func(key, msg string) { v.add(prefix+key, "%s", msg) }})
		}
	}

	if strings.TrimSpace(c.Specs.Dir) == "" {
		v.add("specs.dir", "required")
	}

	s := c.Serve
	if host, port, err := net.SplitHostPort(s.Listen); err != nil {
		v.add("serve.listen", "want host:port such as 127.0.0.1:8080, got %q", s.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add("serve.listen", "invalid port %q", port)
	} else {
		_ = host // "" listens on every interface, as net.Listen does
	}
	if s.MaxConcurrentRuns < 1 {
		v.add("serve.max_concurrent_runs", "must be at least 1, got %d", s.MaxConcurrentRuns)
	}
	if s.LeaseTTL < MinLeaseTTL {
		v.add("serve.lease_ttl", "must be at least %s, got %s", MinLeaseTTL, s.LeaseTTL)
	}
	v.oneOf("serve.catch_up", s.CatchUp, CatchUpModes)
	c.validateGit(v.add)       // git.go
	c.validateApprovals(v.add) // approvals.go
	c.validateRetention(v.add) // retention.go
	c.validateTriggers(v.add)  // triggers.go
	c.validateLimits(v.add)    // limits.go
	if s.MinScheduleInterval < 0 {
		v.add("serve.min_schedule_interval", "must not be negative")
	}
	v.web(s.Web)
	v.nonNegative("serve.pause_after_failures", int64(s.PauseAfterFailures))
	c.Notify.check(v) // notify.go

	return errors.Join(v.errs...)
}

func (v *validator) mcpServer(key, name string, server any) {
	if strings.TrimSpace(name) == "" {
		v.add(key, "server name must not be empty")
	}
	m, ok := server.(map[string]any)
	if !ok {
		v.add(key, "want a mapping such as {command: ..., args: [...]} or {type: http, url: ...}")
		return
	}
	cmd, _ := m["command"].(string)
	u, _ := m["url"].(string)
	if cmd == "" && u == "" {
		v.add(key, "needs command (a stdio server) or url (an http or sse server)")
	}
	if args, ok := m["args"]; ok {
		list, ok := args.([]any)
		if !ok {
			v.add(key+".args", "want a list of strings")
		}
		for i, a := range list {
			if _, ok := a.(string); !ok {
				v.add(fmt.Sprintf("%s.args[%d]", key, i), "want a string (quote it)")
			}
		}
	}
	for _, field := range []string{"env", "headers"} {
		raw, ok := m[field]
		if !ok {
			continue
		}
		vars, ok := raw.(map[string]any)
		if !ok {
			v.add(key+"."+field, "want a mapping of names to strings")
			continue
		}
		for _, name := range sortedKeys(vars) {
			if _, ok := vars[name].(string); !ok {
				v.add(key+"."+field+"."+name, "want a string (quote it)")
			}
		}
	}
	if t, ok := m["type"]; ok {
		if s, _ := t.(string); !slices.Contains([]string{"stdio", "http", "sse"}, s) {
			v.add(key+".type", "want one of stdio, http, sse")
		}
	}
}

type validator struct {
	c    *Config
	errs []error
}

func (v *validator) add(key, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.c.source, Line: v.line(key), Key: key, Err: fmt.Errorf(format, args...)})
}

// line returns the line key was set on, or the line of its closest parent
// set in the file.
func (v *validator) line(key string) int { return yamlfile.Line(v.c.lines, key) }

func (v *validator) oneOf(key, val string, allowed []string) {
	if !slices.Contains(allowed, val) {
		v.add(key, "want one of %s, got %q", strings.Join(allowed, ", "), val)
	}
}

func (v *validator) nonNegative(key string, n int64) {
	if n < 0 {
		v.add(key, "must not be negative")
	}
}

func (v *validator) nonEmptyItems(key string, items []string) {
	for i, s := range items {
		if strings.TrimSpace(s) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		}
	}
}

// pollFloor is the shortest poll interval allowed against baseURL.
func pollFloor(baseURL string) Duration {
	if u, err := url.Parse(baseURL); err == nil && isLoopback(u.Hostname()) {
		return MinLocalPollInterval
	}
	return MinPollInterval
}

// isLoopback reports whether host is "localhost" or a loopback IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackListen reports whether a serve.listen address only accepts
// connections from this machine ("" and 0.0.0.0 listen on every interface).
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}

func snowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
