// Package specs reads spec files (scheduled or by-hand tasks for the model)
// and schedules their runs.
//
// # Spec files
//
// A spec is a markdown file that starts with YAML frontmatter between two
// "---" lines; the markdown after it is the task given to the model:
//
//	---
//	name: nightly-deps
//	schedule: "CRON_TZ=Europe/Berlin 30 2 * * 1-5"
//	surfaces:
//	  - github: {repo: acme/webapp, labels: [dependencies]}
//	  - terminal
//	workdir: ../webapp
//	model: sonnet
//	allowed_tools: [Read, Edit, "Bash(go test:*)"]
//	max_turns: 40
//	timeout: 45m
//	answers:
//	  License: MIT
//	question_timeout: 12h
//	remind_every: 4h
//	escalate_to: discord
//	on_timeout: {action: default, option: Skip this update}
//	---
//	Update the Go dependencies of this module ...
//
// Keys (every one optional; a key with an empty value is as if absent):
//
//   - name: the spec's name, unique in its directory: letters, digits, ".",
//     "_" and "-", starting with a letter or digit, at most 64 characters.
//     Defaults to the file name without ".md".
//   - schedule: a 5-field cron expression ("30 2 * * 1-5"), a descriptor
//     ("@daily", "@hourly", "@every 30m"), either optionally prefixed with
//     "CRON_TZ=Zone " or "TZ=Zone ". Absent: the spec only runs by hand.
//     The configuration refuses a schedule that fires more often than
//     serve.min_schedule_interval (see Spec.CheckInterval).
//   - surfaces: where questions are asked, a list whose items are a surface
//     name (one of the configuration's surfaces: "terminal", "github",
//     "discord") or a one-key mapping from the name to its overrides: keys
//     of the configuration's surfaces.NAME block, decoded and checked as
//     there, of those a spec may set (config.OverrideKeys): github
//     {repo: owner/name, issue: 42, labels: [a, b]}, discord
//     {channel_id: "123…", thread_per_run: true}; terminal has none.
//     Absent: the config's surfaces. Each surface at most once.
//   - workdir: where the agent runs; a relative path is relative to the
//     directory of the spec file, and a leading "~/" is the home directory.
//   - model, allowed_tools, disallowed_tools, mcp_config, permission_mode,
//     max_turns, timeout, idle_timeout: the agent settings; each one set
//     overrides the config's (see Agent). mcp_config is a file, found like
//     workdir.
//   - answers: questions answered in advance, a mapping from a question's
//     header or text (matched case-insensitively) to the answer, written the
//     way a person would answer (an option's label or number, free text; a
//     list of labels for a multi-select question).
//   - question_timeout, remind_every: durations ("12h", "90m").
//   - escalate_to: a surface to ask on when the first reminder goes
//     unanswered, as a name or a one-key mapping with overrides like an item
//     of surfaces; it must not be one of surfaces.
//   - on_timeout: what to do at question_timeout: "fail" (the run fails),
//     "skip" (the model is told nobody answered), or
//     {action: default, option: Label} (the named option is chosen).
//
// Unknown keys (with a "did you mean" for the closest known one), duplicate
// keys and bad values are errors that name the file, the line and the key;
// Parse reports all of them, not only the first.
package specs

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

// on_timeout actions.
const (
	OnTimeoutFail    = "fail"
	OnTimeoutDefault = "default"
	OnTimeoutSkip    = "skip"
)

// Spec is one parsed spec file. Zero values mean "not set in the file": the
// run loop uses the config's value for them.
type Spec struct {
	Name string
	// Path is the file the spec was read from, as given to Parse.
	Path string
	// Schedule is the cron expression; empty for a spec run only by hand.
	Schedule string
	// Surfaces are where questions are asked, in file order; nil means
	// the config's surfaces.
	Surfaces []SurfaceRef
	// WorkDir is where the agent runs; a relative workdir in the file is
	// joined to the directory of Path.
	WorkDir string
	Agent   Agent
	// Answers are the questions answered in advance, in file order.
	Answers         []PresetAnswer
	QuestionTimeout time.Duration
	RemindEvery     time.Duration
	// EscalateTo names the surface of Escalation; empty when not set.
	EscalateTo string
	// Escalation is escalate_to with its overrides; nil when not set.
	Escalation *SurfaceRef
	OnTimeout  OnTimeout
	// Git delivers the run's work as a branch and a pull request; nil
	// when the spec has no git section (git.go).
	Git *Git
	// Body is the task given to the model: the markdown after the
	// frontmatter, without leading and trailing blank space.
	Body string
	// Sections are the keys decoded into structs (see Sections).
	Sections Sections

	// lines maps a top-level key set in the file to its line, for errors
	// found after parsing (a duplicate name, a check against the config).
	lines map[string]int
}

// Line returns the line of the file the top-level key was set on, 0 when
// it was not set.
func (s Spec) Line(key string) int { return s.lines[key] }

// Agent holds the agent settings of a spec. A zero field is not set and
// leaves the config's value; AllowedTools and DisallowedTools are not set
// when nil, and a non-nil empty list ("allowed_tools: []") overrides the
// config's with none.
type Agent struct {
	Model           string
	AllowedTools    []string
	DisallowedTools []string
	// MCPConfig is the MCP servers file, resolved like Spec.WorkDir.
	MCPConfig      string
	PermissionMode string
	MaxTurns       int
	Timeout        time.Duration
	IdleTimeout    time.Duration
}

// SurfaceRef names a surface a spec asks on, with the spec's overrides.
type SurfaceRef struct {
	// Name is one of the configuration's surfaces (config.SurfaceNames).
	Name string
	// Override holds the keys of the configuration's surfaces.NAME block
	// the spec sets, decoded into that block's type; its Apply sets them
	// on the configuration's block. Zero when the spec sets none.
	Override config.Override
}

// PresetAnswer answers in advance every question whose header or text equals
// Match, ignoring case. Answer is read like a person's answer
// (questions.ParseQuestionAnswer); the labels of a list in the file are
// joined with ", ".
type PresetAnswer struct {
	Match  string
	Answer string
}

// OnTimeout is what happens when a question is not answered in time.
type OnTimeout struct {
	// Action is OnTimeoutFail, OnTimeoutDefault or OnTimeoutSkip; empty
	// when not set.
	Action string
	// Option is the label of the option chosen by OnTimeoutDefault.
	Option string
}

// Load reads and parses the spec file at path.
func Load(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read spec: %w", err)
	}
	return Parse(path, data)
}

// LoadDir loads every "*.md" file of dir but README.md (any case), in name
// order; subdirectories are not read. It returns the specs that parsed
// without problems, and as error the Errors of all files together, including
// a spec name used by more than one file (the later files are left out).
// An empty directory has no specs and no error.
func LoadDir(dir string) ([]Spec, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read specs dir: %w", err)
	}
	var (
		specs []Spec
		errs  Errors
		seen  = map[string]string{}
	)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".md") || strings.EqualFold(name, "README.md") {
			continue
		}
		path := filepath.Join(dir, name)
		s, err := Load(path)
		if err != nil {
			var es Errors
			if asErrors(err, &es) {
				errs = append(errs, es...)
			} else {
				errs = append(errs, problem(path, 0, "", err.Error()))
			}
			continue
		}
		if first, dup := seen[s.Name]; dup {
			errs = append(errs, problem(path, s.Line("name"), "name",
				fmt.Sprintf("spec name %q is already used by %s", s.Name, first)))
			continue
		}
		seen[s.Name] = path
		specs = append(specs, s)
	}
	return specs, errs.Err()
}

func asErrors(err error, es *Errors) bool {
	e, ok := err.(Errors)
	if ok {
		*es = e
	}
	return ok
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Parse parses the spec file data read from path. path names the file in
// errors, gives the default name and the directory a relative workdir is
// joined to; Parse does not read it. On error, the returned Spec holds what
// could be read and the error is Errors. A YAML syntax error carries the line
// yaml.v3 reports, which for an unclosed [ or { can be a line early.
func Parse(path string, data []byte) (Spec, error) {
	s := Spec{Path: path}
	d := &decoder{yamlfile.Decoder{File: path}}

	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t\n") != "---" {
		d.add(1, "", "missing frontmatter: a spec file starts with a line \"---\"")
		return s, d.Errs.Err()
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if l := strings.TrimRight(lines[i], " \t\n"); l == "---" || l == "..." {
			end = i
			break
		}
	}
	if end < 0 {
		d.add(1, "", "frontmatter not closed: no line \"---\" after the first")
		return s, d.Errs.Err()
	}
	front := strings.Join(lines[1:end], "")
	s.Body = strings.TrimSpace(strings.Join(lines[end+1:], ""))
	d.Offset = 1 // the frontmatter's first line is the file's second

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		d.Errs = append(d.Errs, yamlfile.SyntaxError(path, d.Offset, err))
		return s, d.Errs.Err()
	}
	if len(doc.Content) > 0 {
		d.spec(&s, doc.Content[0])
	}

	if s.Name == "" && s.Line("name") == 0 {
		base := strings.TrimSuffix(filepath.Base(path), ".md")
		if !nameRE.MatchString(base) {
			d.add(0, "name", fmt.Sprintf("no name given and the file name %q is not a valid name: set name", base))
		} else {
			s.Name = base
		}
	}
	for _, p := range []*string{&s.WorkDir, &s.Agent.MCPConfig} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(path), *p)
		}
	}
	if s.Body == "" {
		d.add(end, "", "missing body: the task for the model follows the frontmatter")
	}
	slices.SortStableFunc(d.Errs, func(a, b *Error) int { return a.Line - b.Line })
	return s, d.Errs.Err()
}

// decoder turns frontmatter nodes into a Spec, collecting every problem;
// its lines are the frontmatter's, Offset makes them the file's.
type decoder struct {
	yamlfile.Decoder
}

// add records a problem at a frontmatter line (0: no line).
func (d *decoder) add(line int, key, msg string) { d.Errorf(line, key, "%s", msg) }

// addf records a problem at node n.
func (d *decoder) addf(n *yaml.Node, key, format string, args ...any) {
	d.Errorf(n.Line, key, format, args...)
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "an alias"
}

// pairs returns the key/value pairs of mapping n, reporting keys that are
// not scalars, duplicates and (when known is not nil) unknown keys; the
// returned pairs are the valid ones, with resolved values.
func (d *decoder) pairs(n *yaml.Node, path string, known []string) [][2]*yaml.Node {
	out, _ := d.pairsOK(n, path, known)
	return out
}

// pairsOK is pairs that also reports whether every key was valid.
func (d *decoder) pairsOK(n *yaml.Node, path string, known []string) ([][2]*yaml.Node, bool) {
	var out [][2]*yaml.Node
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.addf(k, path, "a key must be a string, not %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			d.addf(k, join(path, "<<"), "merge keys are not supported")
			continue
		}
		key := join(path, k.Value)
		if line, dup := first[k.Value]; dup {
			d.addf(k, key, "duplicate key (first on line %d)", line+d.Offset)
			continue
		}
		first[k.Value] = k.Line
		if known != nil && !slices.Contains(known, k.Value) {
			d.addf(k, key, "unknown key%s", yamlfile.Suggest(k.Value, known))
			continue
		}
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out, len(out) == len(n.Content)/2
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var specKeys = []string{
	"name", "schedule", "surfaces", "workdir",
	"model", "allowed_tools", "disallowed_tools", "mcp_config", "permission_mode", "max_turns", "timeout", "idle_timeout",
	"answers", "question_timeout", "remind_every", "escalate_to", "on_timeout", "git",
}

func (d *decoder) spec(s *Spec, root *yaml.Node) {
	root = resolve(root)
	if isNull(root) {
		return
	}
	if root.Kind != yaml.MappingNode {
		d.addf(root, "", "the frontmatter must be a mapping of keys to values, not %s", kindName(root))
		return
	}
	var surfacesNode, escalateNode, remindNode *yaml.Node
	sections := reflect.ValueOf(&s.Sections).Elem()
	sectionFields := yamlfile.Fields(sections.Type())
	known := slices.Concat(specKeys, slices.Collect(maps.Keys(sectionFields)))
	for _, kv := range d.pairs(root, "", known) {
		k, v := kv[0], kv[1]
		key := k.Value
		if isNull(v) {
			continue
		}
		if s.lines == nil {
			s.lines = map[string]int{}
		}
		s.lines[key] = v.Line + d.Offset
		switch key {
		case "name":
			if name, ok := d.str(v, key); ok {
				if !nameRE.MatchString(name) {
					d.addf(v, key, "%q is not a valid name: use letters, digits, \".\", \"_\" and \"-\", starting with a letter or digit, at most 64 characters", name)
				} else {
					s.Name = name
				}
			}
		case "schedule":
			if expr, ok := d.str(v, key); ok {
				if _, err := ParseSchedule(expr); err != nil {
					d.addf(v, key, "%v", err)
				} else {
					s.Schedule = strings.TrimSpace(expr)
				}
			}
		case "surfaces":
			surfacesNode = v
			s.Surfaces = d.surfaces(v, key)
		case "workdir":
			s.WorkDir = d.path(v, key)
		case "model":
			s.Agent.Model, _ = d.str(v, key)
		case "allowed_tools":
			s.Agent.AllowedTools = d.strList(v, key)
		case "disallowed_tools":
			s.Agent.DisallowedTools = d.strList(v, key)
		case "mcp_config":
			s.Agent.MCPConfig = d.path(v, key)
		case "permission_mode":
			if mode, ok := d.str(v, key); ok {
				if !slices.Contains(config.PermissionModes, mode) {
					d.addf(v, key, "unknown permission mode %q (known: %s)", mode, strings.Join(config.PermissionModes, ", "))
				} else {
					s.Agent.PermissionMode = mode
				}
			}
		case "max_turns":
			if n, ok := d.positiveInt(v, key); ok {
				s.Agent.MaxTurns = n
			}
		case "timeout":
			s.Agent.Timeout = d.duration(v, key)
		case "idle_timeout":
			s.Agent.IdleTimeout = d.duration(v, key)
		case "answers":
			s.Answers = d.answers(v, key)
		case "question_timeout":
			s.QuestionTimeout = d.duration(v, key)
		case "remind_every":
			remindNode = v
			s.RemindEvery = d.duration(v, key)
		case "escalate_to":
			escalateNode = v
			if ref, ok := d.surface(v, key); ok {
				s.Escalation = &ref
				s.EscalateTo = ref.Name
			}
		case "on_timeout":
			s.OnTimeout = d.onTimeout(v, key)
		case "git":
			var probs []gitProblem
			s.Git, probs = parseGit(v, key) // git.go
			for _, p := range probs {
				d.add(p.line, p.key, p.msg)
			}
		default:
			d.Decode(v, sections.Field(sectionFields[key]).Addr().Interface(), key)
		}
	}
	if s.Escalation != nil && escalateNode != nil && surfacesNode != nil {
		for _, r := range s.Surfaces {
			if r.Name == s.EscalateTo {
				d.addf(escalateNode, "escalate_to", "%s is already one of surfaces: escalate to another surface", s.EscalateTo)
				s.Escalation, s.EscalateTo = nil, ""
				break
			}
		}
	}
	if s.QuestionTimeout > 0 && s.RemindEvery >= s.QuestionTimeout {
		d.addf(remindNode, "remind_every", "must be shorter than question_timeout (%s), or no reminder is ever sent", s.QuestionTimeout)
	}
}

// path reads a file path, expanding a leading "~/" to the home directory.
func (d *decoder) path(n *yaml.Node, key string) string {
	p, ok := d.str(n, key)
	if !ok {
		return ""
	}
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		d.addf(n, key, "cannot expand ~: %v", err)
		return ""
	}
	return filepath.Join(home, p[1:])
}

// str reads a scalar as a string.
func (d *decoder) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.addf(n, key, "must be a string, not %s", kindName(n))
		return "", false
	}
	if strings.TrimSpace(n.Value) == "" {
		d.addf(n, key, "must not be empty")
		return "", false
	}
	return n.Value, true
}

// strList reads a list of strings, or a single string as a list of one.
// An empty list gives a non-nil empty slice.
func (d *decoder) strList(n *yaml.Node, key string) []string {
	if n.Kind == yaml.ScalarNode {
		if s, ok := d.str(n, key); ok {
			return []string{s}
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.addf(n, key, "must be a list of strings, not %s", kindName(n))
		return nil
	}
	out := []string{}
	for i, item := range n.Content {
		item = resolve(item)
		if s, ok := d.str(item, fmt.Sprintf("%s[%d]", key, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) positiveInt(n *yaml.Node, key string) (int, bool) {
	var i int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
		d.addf(n, key, "must be a whole number, not %q", n.Value)
		return 0, false
	}
	if i <= 0 {
		d.addf(n, key, "must be positive, not %d", i)
		return 0, false
	}
	return i, true
}

// duration reads a positive Go duration ("90s", "1h30m").
func (d *decoder) duration(n *yaml.Node, key string) time.Duration {
	s, ok := d.str(n, key)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		d.addf(n, key, "%q is not a duration such as 90s, 30m or 12h", s)
		return 0
	}
	if v <= 0 {
		d.addf(n, key, "must be positive, not %s (leave the key out to keep the config's value)", s)
		return 0
	}
	return v
}

func (d *decoder) surfaces(n *yaml.Node, key string) []SurfaceRef {
	if n.Kind == yaml.ScalarNode {
		// surfaces: github — a single name.
		if ref, ok := d.surface(n, key); ok {
			return []SurfaceRef{ref}
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.addf(n, key, "must be a list of surfaces, not %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.addf(n, key, "must name at least one surface (leave the key out to use the config's)")
		return nil
	}
	var out []SurfaceRef
	firstLine := map[string]int{}
	for i, item := range n.Content {
		item = resolve(item)
		ikey := fmt.Sprintf("%s[%d]", key, i)
		ref, ok := d.surface(item, ikey)
		if !ok {
			continue
		}
		if line, dup := firstLine[ref.Name]; dup {
			d.addf(item, ikey, "%s is listed twice (first on line %d)", ref.Name, line+d.Offset)
			continue
		}
		firstLine[ref.Name] = item.Line
		out = append(out, ref)
	}
	return out
}

// surface reads a surface name or a one-key mapping from a name to its
// overrides.
func (d *decoder) surface(n *yaml.Node, key string) (SurfaceRef, bool) {
	names := config.SurfaceNames()
	known := strings.Join(names, ", ")
	switch n.Kind {
	case yaml.ScalarNode:
		name, ok := d.str(n, key)
		if !ok {
			return SurfaceRef{}, false
		}
		if !slices.Contains(names, name) {
			d.addf(n, key, "unknown surface %q (known: %s)", name, known)
			return SurfaceRef{}, false
		}
		return SurfaceRef{Name: name}, true
	case yaml.MappingNode:
		pairs := d.pairs(n, key, nil)
		if len(n.Content) != 2 || len(pairs) != 1 {
			d.addf(n, key, "a surface with overrides is a mapping of one key, its name (for example {github: {issue: 42}})")
			return SurfaceRef{}, false
		}
		k, v := pairs[0][0], pairs[0][1]
		name := k.Value
		if !slices.Contains(names, name) {
			d.addf(k, key, "unknown surface %q (known: %s)", name, known)
			return SurfaceRef{}, false
		}
		ref := SurfaceRef{Name: name}
		if isNull(v) {
			return ref, true
		}
		okey := join(key, name)
		if v.Kind != yaml.MappingNode {
			d.addf(v, okey, "overrides must be a mapping, not %s", kindName(v))
			return SurfaceRef{}, false
		}
		if len(config.OverrideKeys(name)) == 0 {
			if len(v.Content) > 0 {
				d.addf(v, okey, "the %s has no overrides", name)
				return SurfaceRef{}, false
			}
			return ref, true
		}
		o, ok := config.DecodeOverride(&d.Decoder, name, v, okey)
		ref.Override = o
		return ref, ok
	}
	d.addf(n, key, "must be a surface name or a mapping from a surface name to its overrides, not %s", kindName(n))
	return SurfaceRef{}, false
}

func (d *decoder) answers(n *yaml.Node, key string) []PresetAnswer {
	if n.Kind != yaml.MappingNode {
		d.addf(n, key, "must be a mapping from a question's header or text to its answer, not %s", kindName(n))
		return nil
	}
	var out []PresetAnswer
	firstLine := map[string]int{}
	for _, kv := range d.pairs(n, key, nil) {
		k, v := kv[0], kv[1]
		match := strings.TrimSpace(k.Value)
		akey := fmt.Sprintf("%s[%q]", key, match)
		if match == "" {
			d.addf(k, key, "a question's header or text must not be empty")
			continue
		}
		lower := strings.ToLower(match)
		if line, dup := firstLine[lower]; dup {
			d.addf(k, akey, "answered twice (first on line %d)", line+d.Offset)
			continue
		}
		firstLine[lower] = k.Line
		var answer string
		switch {
		case isNull(v):
			d.addf(k, akey, "the answer must not be empty")
			continue
		case v.Kind == yaml.SequenceNode:
			labels := d.strList(v, akey)
			if len(labels) == 0 {
				d.addf(v, akey, "the list of labels must not be empty")
				continue
			}
			answer = strings.Join(labels, ", ")
		default:
			a, ok := d.str(v, akey)
			if !ok {
				continue
			}
			answer = strings.TrimSpace(a)
		}
		out = append(out, PresetAnswer{Match: match, Answer: answer})
	}
	return out
}

func (d *decoder) onTimeout(n *yaml.Node, key string) OnTimeout {
	actions := OnTimeoutFail + ", " + OnTimeoutDefault + ", " + OnTimeoutSkip
	var (
		o                    OnTimeout
		actionNode, optNode  *yaml.Node
		actionKey, optionKey = join(key, "action"), join(key, "option")
	)
	switch n.Kind {
	case yaml.ScalarNode:
		actionNode, actionKey = n, key
	case yaml.MappingNode:
		for _, kv := range d.pairs(n, key, []string{"action", "option"}) {
			if isNull(kv[1]) {
				continue
			}
			if kv[0].Value == "action" {
				actionNode = kv[1]
			} else {
				optNode = kv[1]
			}
		}
		if actionNode == nil {
			d.addf(n, actionKey, "missing: one of %s", actions)
			return OnTimeout{}
		}
	default:
		d.addf(n, key, "must be one of %s, or {action: default, option: …}, not %s", actions, kindName(n))
		return OnTimeout{}
	}
	action, ok := d.str(actionNode, actionKey)
	if !ok {
		return OnTimeout{}
	}
	switch action {
	case OnTimeoutFail, OnTimeoutSkip:
		if optNode != nil {
			d.addf(optNode, optionKey, "only on_timeout action default takes an option")
			return OnTimeout{}
		}
	case OnTimeoutDefault:
		if optNode == nil {
			d.addf(actionNode, key, "default needs the option to choose: on_timeout: {action: default, option: …}")
			return OnTimeout{}
		}
		opt, ok := d.str(optNode, optionKey)
		if !ok {
			return OnTimeout{}
		}
		o.Option = strings.TrimSpace(opt)
	default:
		d.addf(actionNode, actionKey, "unknown action %q (known: %s)", action, actions)
		return OnTimeout{}
	}
	o.Action = action
	return o
}

// ScheduleInterval returns the shortest time between two firings of a
// schedule that ParseSchedule accepts: the delay of "@every", else the
// smallest gap among its next firings.
func ScheduleInterval(expr string) (time.Duration, error) {
	sched, err := ParseSchedule(expr)
	if err != nil {
		return 0, err
	}
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		return every.Delay, nil
	}
	var shortest time.Duration
	t := sched.Next(time.Now())
	for range 64 {
		next := sched.Next(t)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(t); shortest == 0 || gap < shortest {
			shortest = gap
		}
		t = next
	}
	return shortest, nil
}

// CheckInterval returns an Error at the schedule key when the spec's
// schedule fires more often than every min (setting names the limit in the
// message); nil when it has no schedule or fires less often.
func (s Spec) CheckInterval(min time.Duration, setting string) error {
	if s.Schedule == "" {
		return nil
	}
	every, err := ScheduleInterval(s.Schedule)
	if err != nil || every >= min {
		return nil
	}
	return problem(s.Path, s.Line("schedule"), "schedule",
		fmt.Sprintf("%q fires every %s, more often than %s (%s) allows: every firing is a paid run", s.Schedule, every, setting, min))
}

// cronParser reads 5-field expressions and descriptors, with an optional
// CRON_TZ= or TZ= prefix.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a schedule as a spec's schedule key does: a 5-field
// cron expression or a descriptor ("@daily", "@every 1h"), optionally
// prefixed with "CRON_TZ=Zone " or "TZ=Zone ". A schedule without a zone
// uses the scheduler's location. A schedule that never fires is an error.
func ParseSchedule(expr string) (sched cron.Schedule, err error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("empty schedule")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		// robfig/cron slices up to the first space and panics without one.
		if !strings.Contains(expr, " ") {
			return nil, fmt.Errorf("%q: a time zone prefix is followed by a space and the schedule", expr)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("%q is not a valid schedule", expr)
		}
	}()
	sched, err = cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid schedule (5 cron fields or a descriptor such as @daily or @every 1h): %v", expr, err)
	}
	if sched.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%q never fires", expr)
	}
	return sched, nil
}
