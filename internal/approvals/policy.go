// Package approvals is the orchestrator's policy for the model's tool calls
// (issue 13, README "Approvals"): which calls are allowed or denied at once
// and which are asked of a person, with rules in the Claude Code CLI's own
// syntax ("Bash(git push:*)", "Edit", "mcp__db__query").
package approvals

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// DefaultHold is how long a live tool call waits for a person before the
// run is parked (approval_hold).
const DefaultHold = 10 * time.Minute

// Action is what the policy does with a call.
type Action string

const (
	ActionAllow Action = "allow" // answered at once: the call runs
	ActionDeny  Action = "deny"  // answered at once: the call is refused
	ActionAsk   Action = "ask"   // a person decides (the default)
	// ActionPass leaves the call to the CLI's own rules: the tools that
	// never need a person (PassTools) and the spec's allowed_tools.
	ActionPass Action = "pass"
)

// PassTools are the tools the orchestrator never asks about: read-only
// tools and the model's own bookkeeping. AskUserQuestion is not among them:
// it is always a question.
var PassTools = []string{
	"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoWrite", "Task", "TaskStop",
	"ToolSearch", "ListAgents", "Skill", "EnterPlanMode", "ExitPlanMode",
}

// AskUserQuestion is the model's native question tool.
const AskUserQuestion = "AskUserQuestion"

// Policy is the approvals section of a spec or of the configuration.
type Policy struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
	// Preallowed are the spec's allowed_tools: the CLI runs them without
	// asking, so the policy leaves them to it.
	Preallowed []string `json:"preallowed,omitempty"`
	// Hold is how long a live call waits for a person before the run
	// parks; 0 parks at once.
	Hold time.Duration `json:"hold"`
}

// Decision is the policy's answer for one call.
type Decision struct {
	Action Action
	// Rule is the rule that decided ("" for the default).
	Rule string
}

// Decide applies p to a call of tool with input. Deny wins over ask, ask
// over allow (the CLI's own order); then allowed_tools and PassTools pass;
// anything else is asked. AskUserQuestion is always asked.
func (p Policy) Decide(tool string, input json.RawMessage) Decision {
	if tool == AskUserQuestion {
		return Decision{Action: ActionAsk}
	}
	for _, list := range []struct {
		rules  []string
		action Action
	}{{p.Deny, ActionDeny}, {p.Ask, ActionAsk}, {p.Allow, ActionAllow}, {p.Preallowed, ActionPass}} {
		for _, r := range list.rules {
			if Match(r, tool, input) {
				return Decision{Action: list.action, Rule: r}
			}
		}
	}
	for _, t := range PassTools {
		if t == tool {
			return Decision{Action: ActionPass}
		}
	}
	if tool == "Bash" && readOnlyCommand(input) {
		return Decision{Action: ActionPass}
	}
	return Decision{Action: ActionAsk}
}

// readOnlyCommands are programs that only read or print; a Bash call of one
// of them alone (no shell operators, redirections or substitutions) is left
// to the CLI, which runs such commands without asking.
var readOnlyCommands = []string{"true", "false", "echo", "pwd", "ls", "cat", "head", "tail", "wc", "date", "whoami", "uname"}

func readOnlyCommand(input json.RawMessage) bool {
	var in struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(input, &in) != nil {
		return false
	}
	cmd := strings.TrimSpace(in.Command)
	if cmd == "" || strings.ContainsAny(cmd, ";&|<>$`\\(){}\n*?[~") {
		return false
	}
	prog, _, _ := strings.Cut(cmd, " ")
	for _, p := range readOnlyCommands {
		if prog == p {
			return true
		}
	}
	return false
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// Validate checks a rule's syntax: a tool name, optionally followed by
// "(content)".
func Validate(rule string) error {
	name, content, hasContent, err := split(rule)
	if err != nil {
		return err
	}
	if !toolNameRE.MatchString(name) {
		return fmt.Errorf("rule %q: %q is not a tool name", rule, name)
	}
	if hasContent && strings.TrimSpace(content) == "" {
		return fmt.Errorf("rule %q: empty parentheses (write the tool name alone to match every call)", rule)
	}
	return nil
}

func split(rule string) (name, content string, hasContent bool, err error) {
	rule = strings.TrimSpace(rule)
	if rule == "" {
		return "", "", false, fmt.Errorf("empty rule")
	}
	i := strings.IndexByte(rule, '(')
	if i < 0 {
		return rule, "", false, nil
	}
	if !strings.HasSuffix(rule, ")") {
		return "", "", false, fmt.Errorf("rule %q: no closing parenthesis", rule)
	}
	return rule[:i], rule[i+1 : len(rule)-1], true, nil
}

// Match says whether rule matches a call of tool with input, as the CLI
// reads its permission rules:
//   - "Tool" matches every call of Tool; "mcp__server" every tool of an MCP
//     server.
//   - "Bash(cmd)" matches the command cmd exactly; "Bash(prefix:*)" a command
//     that is prefix or starts with prefix and a space; a "*" elsewhere
//     matches any text.
//   - "Read(glob)", "Edit(glob)", "Write(glob)" match the call's file path
//     ("**" any directories, "*" within one).
//   - "WebFetch(domain:host)" matches a URL of that host.
//
// A rule that does not parse matches nothing (Validate reports it).
func Match(rule, tool string, input json.RawMessage) bool {
	name, content, hasContent, err := split(rule)
	if err != nil {
		return false
	}
	if !hasContent {
		if name == tool {
			return true
		}
		server, ok := strings.CutPrefix(name, "mcp__")
		return ok && !strings.Contains(server, "__") && strings.HasPrefix(tool, name+"__")
	}
	if name != tool {
		return false
	}
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch tool {
	case "Bash":
		return matchCommand(content, strings.TrimSpace(str("command")))
	case "WebFetch":
		host, ok := strings.CutPrefix(content, "domain:")
		if !ok {
			return false
		}
		u, err := url.Parse(str("url"))
		return err == nil && u.Hostname() != "" && strings.EqualFold(u.Hostname(), host)
	default:
		p := str("file_path")
		if p == "" {
			p = str("path")
		}
		if p == "" {
			p = str("notebook_path")
		}
		return p != "" && matchPath(content, p)
	}
}

func matchCommand(pattern, cmd string) bool {
	if cmd == "" {
		return false
	}
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	if !strings.Contains(pattern, "*") {
		return cmd == pattern
	}
	parts := strings.Split(pattern, "*")
	re := "^"
	for i, p := range parts {
		if i > 0 {
			re += ".*"
		}
		re += regexp.QuoteMeta(p)
	}
	ok, _ := regexp.MatchString(re+"$", cmd)
	return ok
}

// matchPath matches a file path against a glob where "**" spans
// directories; a pattern without "/" matches the base name.
func matchPath(pattern, p string) bool {
	p = path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(p))
		return ok
	}
	re := "^"
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			re += ".*"
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				re += "/?"
			}
		case c == '*':
			re += "[^/]*"
		case c == '?':
			re += "[^/]"
		default:
			re += regexp.QuoteMeta(string(c))
		}
	}
	if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "**") {
		re = "^(.*/)?" + re[1:]
	}
	ok, _ := regexp.MatchString(re+"$", p)
	return ok
}
