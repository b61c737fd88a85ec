// Package approvals is the orchestrator's policy for the model's tool calls
// (issue 13, docs/approvals.md "Approvals and the model's own questions"):
// which calls are allowed or denied at once and which are asked of a person, with rules in the Claude Code CLI's own
// syntax ("Bash(git push:*)", "Edit", "mcp__db__query").
//
// It holds the pure rules only — the policy, matching calls against rules,
// splitting shell commands, validating rules — and imports no store, no
// executor and no database driver: internal/config and specs check rules
// with it. The store-backed side (a call's stored decision, the question a
// person is asked, the CLI's hook) is package gate below it.
package approvals

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
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
	// Workdir is the directory of the run's agent: relative paths and path
	// rules are read from it ("" before the run's turn stores it: path
	// rules then allow no relative path).
	Workdir string `json:"workdir,omitempty"`
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
//
// Deny and ask rules are read broadly: one that matches any simple command
// of a Bash line, or the path as given or as resolved, applies. Allow rules
// and allowed_tools are read strictly: a Bash line is allowed only when the
// shell runs nothing but simple commands of plain words and each of them is
// allowed (by a rule, allowed_tools or the read-only list); a file tool's
// path only when it resolves (symbolic links followed) to where the rule
// says, relative rules inside Workdir.
func (p Policy) Decide(tool string, input json.RawMessage) Decision {
	if tool == AskUserQuestion {
		return Decision{Action: ActionAsk}
	}
	c := newCall(tool, input)
	for _, list := range []struct {
		rules  []string
		action Action
	}{{p.Deny, ActionDeny}, {p.Ask, ActionAsk}} {
		for _, r := range list.rules {
			if c.touches(r, p.Workdir) {
				return Decision{Action: list.action, Rule: r}
			}
		}
	}
	if tool == "Bash" {
		return p.decideBash(c)
	}
	for _, list := range []struct {
		rules  []string
		action Action
	}{{p.Allow, ActionAllow}, {p.Preallowed, ActionPass}} {
		for _, r := range list.rules {
			if c.allowedBy(r, p.Workdir) {
				return Decision{Action: list.action, Rule: r}
			}
		}
	}
	for _, t := range PassTools {
		if t == tool {
			return Decision{Action: ActionPass}
		}
	}
	return Decision{Action: ActionAsk}
}

// decideBash allows a Bash line when every simple command of it is allowed
// (see Decide); a rule naming the tool alone ("Bash") allows any line.
func (p Policy) decideBash(c call) Decision {
	for _, list := range []struct {
		rules  []string
		action Action
	}{{p.Allow, ActionAllow}, {p.Preallowed, ActionPass}} {
		for _, r := range list.rules {
			if name, _, has, err := split(r); err == nil && !has && name == "Bash" {
				return Decision{Action: list.action, Rule: r}
			}
		}
	}
	sc := c.shell()
	if !sc.Simple {
		return Decision{Action: ActionAsk}
	}
	var used []string
	for _, part := range sc.Parts {
		switch rule, action := p.allowPart(part); action {
		case ActionAllow:
			if !slices.Contains(used, rule) {
				used = append(used, rule)
			}
		case ActionPass:
		default:
			return Decision{Action: ActionAsk}
		}
	}
	if len(used) > 0 {
		return Decision{Action: ActionAllow, Rule: strings.Join(used, ", ")}
	}
	return Decision{Action: ActionPass}
}

// allowPart is what allows one simple command: an allow rule (ActionAllow),
// allowed_tools or the read-only list (ActionPass), or nothing (ActionAsk).
func (p Policy) allowPart(part SimpleCommand) (string, Action) {
	for _, list := range []struct {
		rules  []string
		action Action
	}{{p.Allow, ActionAllow}, {p.Preallowed, ActionPass}} {
		for _, r := range list.rules {
			name, content, has, err := split(r)
			if err != nil || name != "Bash" || !has {
				continue
			}
			if pat, ok := parseCommandPattern(content); ok && pat.match(part.Words) {
				return r, list.action
			}
		}
	}
	if readOnlyPart(part) {
		return "", ActionPass
	}
	return "", ActionAsk
}

// readOnlyCommands are programs that only read or print; a simple command
// of one of them with plain words (no glob, no redirection) is left to the
// CLI, which runs such commands without asking.
var readOnlyCommands = []string{"true", "false", "echo", "pwd", "ls", "cat", "head", "tail", "wc", "date", "whoami", "uname"}

func readOnlyPart(part SimpleCommand) bool {
	if !part.Literal || part.Expands || len(part.Words) == 0 {
		return false
	}
	return slices.Contains(readOnlyCommands, part.Words[0])
}

// AllowedForRun says whether a rule that "Allow for this run" stored allows
// a call: only the very call allowed — the same tool with the same input,
// compared canonically (questions.ToolRule). A rule stored in another form
// (before exact rules) allows nothing: the call is asked again.
func AllowedForRun(rule, tool string, input json.RawMessage) bool {
	r := questions.ToolRule(questions.ToolCall{Tool: tool, Input: input})
	return r != "" && r == rule
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
	if hasContent && name == "Bash" {
		if _, ok := parseCommandPattern(content); !ok {
			return fmt.Errorf("rule %q: %q is not one simple command of plain words (a rule matches one command; a line of several, joined by ; && || or |, is allowed when each is)", rule, content)
		}
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

// Match says whether rule allows a call of tool with input, read strictly
// as an allow rule (see Decide), with relative paths inside workdir:
//   - "Tool" matches every call of Tool; "mcp__server" every tool of an MCP
//     server.
//   - "Bash(cmd args)" matches a line that runs only that simple command,
//     word for word; "Bash(prefix:*)" one whose words start with prefix's;
//     a word "*" any words there, a "*" within a word any text within that
//     word. A line of several simple commands needs each to match.
//   - "Read(glob)", "Edit(glob)", "Write(glob)", "NotebookEdit(glob)" match
//     the call's file path once resolved ("**" any directories, "*" within
//     one; a glob without "/" the base name of a path inside workdir, one
//     with "/" anchored at workdir, or at the root when it starts with "/").
//   - "WebFetch(domain:host)" matches a URL of that host.
//
// A rule that does not parse matches nothing (Validate reports it).
func Match(rule, tool string, input json.RawMessage, workdir string) bool {
	if tool == "Bash" {
		name, _, _, err := split(rule)
		if err != nil || name != "Bash" {
			return false
		}
		return Policy{Allow: []string{rule}, Workdir: workdir}.decideBash(newCall(tool, input)).Action == ActionAllow
	}
	return newCall(tool, input).allowedBy(rule, workdir)
}

// call is a tool call as the rules read it.
type call struct {
	tool  string
	in    map[string]any
	split *ShellCommand
}

func newCall(tool string, input json.RawMessage) call {
	c := call{tool: tool}
	_ = json.Unmarshal(input, &c.in)
	return c
}

func (c call) str(k string) string { s, _ := c.in[k].(string); return s }

func (c *call) shell() ShellCommand {
	if c.split == nil {
		sc := SplitCommand(c.str("command"))
		c.split = &sc
	}
	return *c.split
}

// path is the file a file tool's call names.
func (c call) path() string {
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		if p := c.str(k); p != "" {
			return p
		}
	}
	return ""
}

// byName reports whether rule names the call's tool alone (matched true),
// or has content to read for this tool (content, ok false).
func (c call) byName(rule string) (content string, matched, ok bool) {
	name, content, hasContent, err := split(rule)
	if err != nil {
		return "", false, false
	}
	if !hasContent {
		if name == c.tool {
			return "", true, true
		}
		server, isMCP := strings.CutPrefix(name, "mcp__")
		return "", isMCP && !strings.Contains(server, "__") && strings.HasPrefix(c.tool, name+"__"), true
	}
	if name != c.tool {
		return "", false, true
	}
	return content, false, false
}

// allowedBy reads rule strictly, as an allow rule (not for Bash: decideBash).
func (c call) allowedBy(rule, workdir string) bool {
	content, matched, done := c.byName(rule)
	if done {
		return matched
	}
	switch c.tool {
	case "Bash":
		return false
	case "WebFetch":
		return c.matchHost(content)
	default:
		p := c.path()
		return p != "" && matchResolvedPath(content, p, workdir)
	}
}

// touches reads rule broadly, as a deny or ask rule: a Bash rule that
// matches the whole line as text or any simple command in it (inside
// substitutions and subshells too), a path rule that matches the path as
// given (anywhere) or as resolved.
func (c *call) touches(rule, workdir string) bool {
	content, matched, done := c.byName(rule)
	if done {
		return matched
	}
	switch c.tool {
	case "Bash":
		cmd := strings.TrimSpace(c.str("command"))
		if cmd == "" {
			return false
		}
		if matchCommandText(content, cmd) {
			return true
		}
		pat, ok := parseCommandPattern(content)
		if !ok {
			return false
		}
		for _, part := range c.shell().Parts {
			if pat.match(part.Words) {
				return true
			}
		}
		return false
	case "WebFetch":
		return c.matchHost(content)
	default:
		p := c.path()
		return p != "" && (matchPath(content, p) || matchResolvedPath(content, p, workdir))
	}
}

func (c call) matchHost(content string) bool {
	host, ok := strings.CutPrefix(content, "domain:")
	if !ok {
		return false
	}
	u, err := url.Parse(c.str("url"))
	return err == nil && u.Hostname() != "" && strings.EqualFold(u.Hostname(), host)
}

// matchCommandText matches a whole command line as text (deny and ask
// rules): "prefix:*" a line that is prefix or starts with it and a space,
// "*" any text.
func matchCommandText(pattern, cmd string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ")
	}
	if !strings.Contains(pattern, "*") {
		return cmd == pattern
	}
	parts := strings.Split(pattern, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	ok, _ := regexp.MatchString(`(?s)^`+strings.Join(parts, ".*")+`$`, cmd)
	return ok
}

// globRE is a path glob as a regular expression body: "**" any
// directories, "*" and "?" within one.
func globRE(pattern string) string {
	var re strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			re.WriteString(".*")
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				re.WriteString("/?")
			}
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return re.String()
}

// matchPath matches a file path as given against a glob, unanchored (deny
// and ask rules): a pattern without "/" matches the base name, a relative
// one any tail of the path.
func matchPath(pattern, p string) bool {
	p = path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(p))
		return ok
	}
	re := "^" + globRE(pattern)
	if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "**") {
		re = "^(.*/)?" + re[1:]
	}
	ok, _ := regexp.MatchString(re+"$", p)
	return ok
}

// matchResolvedPath matches the file a call names, resolved (ResolvePath),
// against a glob read strictly: one starting with "/" (or the CLI's "//")
// is absolute; any other needs the path inside workdir (resolved too) and
// is anchored there, a glob without "/" matching the base name. A pattern
// with a ".." segment or starting with "~" matches nothing.
func matchResolvedPath(pattern, p, workdir string) bool {
	if pattern == "" || strings.HasPrefix(pattern, "~") || slices.Contains(strings.Split(pattern, "/"), "..") {
		return false
	}
	if strings.HasPrefix(pattern, "/") {
		abs, ok := ResolvePath(p, workdir)
		if !ok {
			return false
		}
		pattern = "/" + strings.TrimLeft(pattern, "/")
		ok, _ = regexp.MatchString("^"+globRE(pattern)+"$", filepath.ToSlash(abs))
		return ok
	}
	if workdir == "" {
		return false
	}
	abs, ok := ResolvePath(p, workdir)
	if !ok {
		return false
	}
	wd, ok := ResolvePath(workdir, "")
	if !ok {
		return false
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return false
	}
	rel = filepath.ToSlash(rel)
	pattern = strings.TrimPrefix(pattern, "./")
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(rel))
		return ok
	}
	ok, _ = regexp.MatchString("^"+globRE(pattern)+"$", rel)
	return ok
}

// ResolvePath is the file p names: made absolute against workdir, cleaned
// (no ".."), and with the symbolic links of its existing part followed. ok
// is false when that cannot be known: a relative path without a workdir,
// or a link that points nowhere (writing through it would create its
// target, wherever that is).
func ResolvePath(p, workdir string) (string, bool) {
	if !filepath.IsAbs(p) {
		if workdir == "" || !filepath.IsAbs(workdir) {
			return "", false
		}
		p = filepath.Join(workdir, p)
	}
	p = filepath.Clean(p)
	cur, rest := p, ""
	for {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), true
		}
		if _, err := os.Lstat(cur); err == nil {
			return "", false // it exists, but does not resolve: a dangling link or a loop
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, true
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// Encode is the policy as the store keeps it for a run (gate.LoadPolicy
// reads it back).
func (p Policy) Encode() json.RawMessage {
	b, _ := json.Marshal(p) // strings and a number only
	return b
}
