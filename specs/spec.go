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
//     max_turns, max_cost_usd, timeout, idle_timeout: the agent settings; each one set
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
//     {action: default, option: Label} (the named option is chosen, and
//     the model is told it was the default), "decide" (the model is told
//     nobody answered and decides itself, saying what it chose) or "skip"
//     (the model is told nobody answered and leaves out what depends on
//     the question, saying what it left out). The exact texts are in the
//     README's "When nobody answers".
//   - max_cost_usd: dollars the run may spend (passed to the CLI as
//     --max-budget-usd, for what is left); at that limit, or at max_turns,
//     the run asks whether to go on (see the README's "Budgets").
//   - max_cost_usd_per_day: dollars the spec's runs together may spend in
//     one day (in the config's limits.timezone); a run that reaches it
//     parks with a question: Continue (raise the day's cap once) or Stop.
//   - the sections of Sections, such as git (see Git).
//
// The frontmatter is decoded by the decoder the configuration uses
// (internal/yamlfile), with the same messages: unknown keys (with a "did
// you mean" for the closest known one), duplicate keys, wrong types and bad
// values are errors that name the file, the line and the key; Parse reports
// all of them, not only the first.
package specs

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
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
	OnTimeoutDecide  = "decide"
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
	// MaxCostUSDPerDay is what the spec's runs together may spend in one
	// day (limits.timezone), max_cost_usd_per_day; 0: no cap of its own.
	MaxCostUSDPerDay float64
	// Answers are the questions answered in advance, in file order.
	Answers         []PresetAnswer
	QuestionTimeout time.Duration
	RemindEvery     time.Duration
	// EscalateTo names the surface of Escalation; empty when not set.
	EscalateTo string
	// Escalation is escalate_to with its overrides; nil when not set.
	Escalation *SurfaceRef
	OnTimeout  OnTimeout
	// Body is the task given to the model: the markdown after the
	// frontmatter, without leading and trailing blank space.
	Body string
	// Sections are the frontmatter's sections (see Sections), such as
	// Git; their fields are promoted (sp.Git).
	Sections

	// lines maps a key set in the file (dotted below the top level:
	// "git.branch") to its line, for errors found after parsing (a
	// duplicate name, a check against the config).
	lines map[string]int
}

// Line returns the line of the file the key ("schedule", "git.branch") was
// set on, 0 when it was not set.

// Floors of a spec's intervals, enforced by Parse (and so by validate).
const (
	MinRemindEvery     = time.Minute
	MinQuestionTimeout = time.Second
)

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
	// MaxCostUSD is what the run may spend before it asks whether to go
	// on (max_cost_usd); 0 leaves the config's.
	MaxCostUSD  float64
	Timeout     time.Duration
	IdleTimeout time.Duration
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
	// Action is OnTimeoutFail, OnTimeoutDefault, OnTimeoutDecide or
	// OnTimeoutSkip; empty
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
	d := &yamlfile.Decoder{File: path, ScalarLists: true}

	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t\n") != "---" {
		d.Errorf(1, "", "missing frontmatter: a spec file starts with a line \"---\"")
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
		d.Errorf(1, "", "frontmatter not closed: no line \"---\" after the first")
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
	var fm frontmatter
	d.Lines = map[string]int{}
	if len(doc.Content) > 0 {
		d.Decode(doc.Content[0], &fm, "")
	}
	s.lines = d.Lines
	fm.fill(&s, d) // frontmatter.go
	if s.Body == "" {
		d.Errorf(end, "", "missing body: the task for the model follows the frontmatter")
	}
	slices.SortStableFunc(d.Errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return s, d.Errs.Err()
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
