package specs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		data string
		want Spec // Path, and the unexported lines, are not compared
	}{
		{
			name: "minimal: name from the file name, no schedule",
			path: "specs/hello-world.md",
			data: "---\n---\nSay hello.\n",
			want: Spec{Name: "hello-world", Body: "Say hello."},
		},
		{
			name: "empty values are absent",
			path: "a.md",
			data: "---\nname:\nschedule:\nsurfaces:\nanswers:\non_timeout:\n---\nTask\n",
			want: Spec{Name: "a", Body: "Task"},
		},
		{
			name: "every key",
			path: filepath.Join("specs", "x.md"),
			data: `---
name: nightly.deps_2
schedule: "CRON_TZ=Europe/Berlin 30 2 * * 1-5"
surfaces:
  - terminal
  - discord: {channel_id: 1187436312345678901, thread_per_run: false}
workdir: ../app
model: sonnet
allowed_tools: [Read, "Bash(go test:*)"]
disallowed_tools: WebFetch
mcp_config: mcp.json
permission_mode: acceptEdits
max_turns: 40
timeout: 45m
idle_timeout: 90s
answers:
  Database: PostgreSQL
  Which sections?: [Added, Fixed]
question_timeout: 12h
remind_every: 4h
escalate_to: {github: {repo: acme/web-app, issue: 42, labels: [deps, bot]}}
on_timeout: {action: default, option: "  Keep it  "}
---

# Task

Update things.

`,
			want: Spec{
				Name:     "nightly.deps_2",
				Schedule: "CRON_TZ=Europe/Berlin 30 2 * * 1-5",
				Surfaces: []SurfaceRef{
					{Name: "terminal"},
					{Name: "discord", Override: config.Override{Value: &config.Discord{ChannelID: "1187436312345678901", ThreadPerRun: false}, Keys: []string{"channel_id", "thread_per_run"}}},
				},
				WorkDir: "app",
				Agent: Agent{
					Model: "sonnet", AllowedTools: []string{"Read", "Bash(go test:*)"}, DisallowedTools: []string{"WebFetch"},
					MCPConfig: filepath.Join("specs", "mcp.json"), PermissionMode: "acceptEdits", MaxTurns: 40, Timeout: 45 * time.Minute, IdleTimeout: 90 * time.Second,
				},
				Answers:         []PresetAnswer{{Match: "Database", Answer: "PostgreSQL"}, {Match: "Which sections?", Answer: "Added, Fixed"}},
				QuestionTimeout: 12 * time.Hour,
				RemindEvery:     4 * time.Hour,
				EscalateTo:      "github",
				Escalation:      &SurfaceRef{Name: "github", Override: config.Override{Value: &config.GitHub{Repo: "acme/web-app", Issue: 42, Labels: []string{"deps", "bot"}}, Keys: []string{"repo", "issue", "labels"}}},
				OnTimeout:       OnTimeout{Action: "default", Option: "Keep it"},
				Body:            "# Task\n\nUpdate things.",
			},
		},
		{
			name: "a single surface name; surfaces with null overrides",
			path: "s.md",
			data: "---\nsurfaces: github\nescalate_to: {discord: }\n---\nT\n",
			want: Spec{Name: "s", Surfaces: []SurfaceRef{{Name: "github"}}, EscalateTo: "discord", Escalation: &SurfaceRef{Name: "discord"}, Body: "T"},
		},
		{
			name: "terminal with an empty mapping",
			path: "s.md",
			data: "---\nsurfaces: [{terminal: {}}]\n---\nT\n",
			want: Spec{Name: "s", Surfaces: []SurfaceRef{{Name: "terminal"}}, Body: "T"},
		},
		{
			name: "an empty tool list is not nil",
			path: "s.md",
			data: "---\nallowed_tools: []\n---\nT\n",
			want: Spec{Name: "s", Agent: Agent{AllowedTools: []string{}}, Body: "T"},
		},
		{
			name: "aliases",
			path: "s.md",
			data: "---\nallowed_tools: &tools [Read, Edit]\ndisallowed_tools: *tools\n---\nT\n",
			want: Spec{Name: "s", Agent: Agent{AllowedTools: []string{"Read", "Edit"}, DisallowedTools: []string{"Read", "Edit"}}, Body: "T"},
		},
		{
			name: "on_timeout as a word",
			path: "s.md",
			data: "---\non_timeout: skip\n---\nT\n",
			want: Spec{Name: "s", OnTimeout: OnTimeout{Action: "skip"}, Body: "T"},
		},
		{
			name: "on_timeout decide",
			path: "s.md",
			data: "---\non_timeout: decide\n---\nT\n",
			want: Spec{Name: "s", OnTimeout: OnTimeout{Action: "decide"}, Body: "T"},
		},
		{
			name: "max_cost_usd",
			path: "s.md",
			data: "---\nmax_cost_usd: 2.50\nmax_turns: 30\n---\nT\n",
			want: Spec{Name: "s", Agent: Agent{MaxCostUSD: 2.5, MaxTurns: 30}, Body: "T"},
		},
		{
			name: "max_cost_usd_per_day",
			path: "s.md",
			data: "---\nmax_cost_usd_per_day: 5\n---\nT\n",
			want: Spec{Name: "s", MaxCostUSDPerDay: 5, Body: "T"},
		},
		{
			name: "max_cost_usd whole dollars",
			path: "s.md",
			data: "---\nmax_cost_usd: 3\n---\nT\n",
			want: Spec{Name: "s", Agent: Agent{MaxCostUSD: 3}, Body: "T"},
		},
		{
			name: "on_timeout fail as a mapping",
			path: "s.md",
			data: "---\non_timeout: {action: fail}\n---\nT\n",
			want: Spec{Name: "s", OnTimeout: OnTimeout{Action: "fail"}, Body: "T"},
		},
		{
			name: "descriptors",
			path: "s.md",
			data: "---\nschedule: \"TZ=UTC @every 1s\"\n---\nT\n",
			want: Spec{Name: "s", Schedule: "TZ=UTC @every 1s", Body: "T"},
		},
		{
			name: "CRLF, a byte order mark, a yaml end marker and trailing spaces",
			path: "s.md",
			data: "\ufeff--- \r\nname: crlf\r\nschedule: '@daily'\r\n...\r\nLine one\r\nLine two\r\n",
			want: Spec{Name: "crlf", Schedule: "@daily", Body: "Line one\nLine two"},
		},
		{
			name: "an absolute workdir is kept; a body with --- lines",
			path: "s.md",
			data: "---\nworkdir: /srv/app\n---\nBefore\n---\nAfter\n",
			want: Spec{Name: "s", WorkDir: "/srv/app", Body: "Before\n---\nAfter"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.path, []byte(tt.data))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got.Path != tt.path {
				t.Errorf("Path = %q, want %q", got.Path, tt.path)
			}
			got.Path, got.lines = "", nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

// TestParseHome expands "~/" (not parallel: it sets HOME).
func TestParseHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	s, err := Parse("x/s.md", []byte("---\nworkdir: ~/src/app\nmcp_config: \"~\"\n---\nT\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "src", "app"); s.WorkDir != want {
		t.Errorf("WorkDir = %q, want %q", s.WorkDir, want)
	}
	if s.Agent.MCPConfig != home {
		t.Errorf("MCPConfig = %q, want %q", s.Agent.MCPConfig, home)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string // default "e.md"
		data string
		line int
		key  string
		msg  string // a substring of the message
	}{
		{name: "no frontmatter", data: "Just a task\n", line: 1, msg: "missing frontmatter"},
		{name: "empty file", data: "", line: 1, msg: "missing frontmatter"},
		{name: "unclosed frontmatter", data: "---\nname: x\nTask\n", line: 1, msg: "frontmatter not closed"},
		{name: "invalid YAML", data: "---\nname: x\nmodel: : x\n---\nT\n", line: 3, msg: "invalid YAML: mapping values are not allowed"},
		{name: "tab indentation", data: "---\nname: x\n\tmodel: x\n---\nT\n", line: 3, msg: "invalid YAML: found a tab"},
		{name: "frontmatter is a list", data: "---\n- a\n---\nT\n", line: 2, msg: "want a mapping of keys, found a list"},
		{name: "unknown key", data: "---\nname: x\nschedul: '@daily'\n---\nT\n", line: 3, key: "schedul", msg: "unknown key"},
		{name: "duplicate key", data: "---\nmodel: a\nmodel: b\n---\nT\n", line: 3, key: "model", msg: "duplicate key (first set on line 2)"},
		{name: "non-scalar key", data: "---\n[a]: b\n---\nT\n", line: 2, msg: "keys must be plain names"},
		{name: "merge key", data: "---\n<<: {model: x}\n---\nT\n", line: 2, key: "<<", msg: "merge keys are not supported"},
		{name: "bad name", data: "---\nname: -x\n---\nT\n", line: 2, key: "name", msg: "not a valid name"},
		{name: "name from a bad file name", path: "dir/My Spec.md", data: "---\n---\nT\n", key: "name", msg: "set name"},
		{name: "name is a list", data: "---\nname: [a]\n---\nT\n", line: 2, key: "name", msg: "want a string, found a list"},
		{name: "bad cron field", data: "---\nschedule: '* * * *'\n---\nT\n", line: 2, key: "schedule", msg: "not a valid schedule"},
		{name: "bad descriptor", data: "---\nschedule: '@sometimes'\n---\nT\n", line: 2, key: "schedule", msg: "not a valid schedule"},
		{name: "bad every", data: "---\nschedule: '@every soon'\n---\nT\n", line: 2, key: "schedule", msg: "not a valid schedule"},
		{name: "zone without a schedule", data: "---\nschedule: TZ=UTC\n---\nT\n", line: 2, key: "schedule", msg: "followed by a space"},
		{name: "unknown zone", data: "---\nschedule: CRON_TZ=Mars/Olympus 0 1 * * *\n---\nT\n", line: 2, key: "schedule", msg: "not a valid schedule"},
		{name: "never fires", data: "---\nschedule: 0 0 30 2 *\n---\nT\n", line: 2, key: "schedule", msg: "never fires"},
		{name: "empty surfaces", data: "---\nsurfaces: []\n---\nT\n", line: 2, key: "surfaces", msg: "at least one surface"},
		{name: "surfaces as a mapping", data: "---\nsurfaces: {github: {}}\n---\nT\n", line: 2, key: "surfaces", msg: "want a list of surfaces, found a mapping"},
		{name: "unknown surface", data: "---\nsurfaces: [terminal, matrix]\n---\nT\n", line: 2, key: "surfaces[1]", msg: `unknown surface "matrix"`},
		{name: "unknown surface with overrides", data: "---\nsurfaces:\n  - matrix: {x: 1}\n---\nT\n", line: 3, key: "surfaces[0]", msg: `unknown surface "matrix"`},
		{name: "bad slack channel", data: "---\nsurfaces: [{slack: {channel: general}}]\n---\nT\n", line: 2, key: "surfaces[0].slack.channel", msg: "Slack channel ID"},
		{name: "two surfaces in one item", data: "---\nsurfaces:\n  - {github: {}, discord: {}}\n---\nT\n", line: 3, key: "surfaces[0]", msg: "mapping of one key"},
		{name: "surface twice", data: "---\nsurfaces:\n  - github\n  - github: {issue: 1}\n---\nT\n", line: 4, key: "surfaces[1]", msg: "listed twice (first on line 3)"},
		{name: "terminal overrides", data: "---\nsurfaces: [{terminal: {x: 1}}]\n---\nT\n", line: 2, key: "surfaces[0].terminal", msg: "no overrides"},
		{name: "overrides not a mapping", data: "---\nsurfaces: [{github: 42}]\n---\nT\n", line: 2, key: "surfaces[0].github", msg: "want a mapping of keys, found a number"},
		{name: "bad repo", data: "---\nsurfaces: [{github: {repo: acme}}]\n---\nT\n", line: 2, key: "surfaces[0].github.repo", msg: "not owner/name"},
		{name: "issue not a number", data: "---\nsurfaces: [{github: {issue: '#4'}}]\n---\nT\n", line: 2, key: "surfaces[0].github.issue", msg: "whole number"},
		{name: "unknown github key", data: "---\nsurfaces:\n  - github:\n      label: x\n---\nT\n", line: 4, key: "surfaces[0].github.label", msg: "unknown key"},
		{name: "bad channel", data: "---\nsurfaces: [{discord: {channel_id: general}}]\n---\nT\n", line: 2, key: "surfaces[0].discord.channel_id", msg: "Discord channel ID"},
		{name: "bad bool", data: "---\nsurfaces: [{discord: {thread_per_run: yes}}]\n---\nT\n", line: 2, key: "surfaces[0].discord.thread_per_run", msg: "true or false"},
		{name: "tool list of lists", data: "---\nallowed_tools: [[a]]\n---\nT\n", line: 2, key: "allowed_tools[0]", msg: "want a string, found a list"},
		{name: "tools as a mapping", data: "---\nallowed_tools: {a: b}\n---\nT\n", line: 2, key: "allowed_tools", msg: "want a list, found a mapping"},
		{name: "bad permission mode", data: "---\npermission_mode: yolo\n---\nT\n", line: 2, key: "permission_mode", msg: "want one of default, acceptEdits"},
		{name: "max_turns zero", data: "---\nmax_turns: 0\n---\nT\n", line: 2, key: "max_turns", msg: "must be positive"},
		{name: "max_turns fraction", data: "---\nmax_turns: 1.5\n---\nT\n", line: 2, key: "max_turns", msg: "whole number"},
		{name: "max_cost_usd_per_day negative", data: "---\nmax_cost_usd_per_day: -5\n---\nT\n", line: 2, key: "max_cost_usd_per_day", msg: "must be a positive amount of dollars"},
		{name: "max_cost_usd zero", data: "---\nmax_cost_usd: 0\n---\nT\n", line: 2, key: "max_cost_usd", msg: "must be a positive amount of dollars"},
		{name: "max_cost_usd negative", data: "---\nmax_cost_usd: -1.5\n---\nT\n", line: 2, key: "max_cost_usd", msg: "must be a positive amount of dollars"},
		{name: "max_cost_usd with a dollar sign", data: "---\nmax_cost_usd: $5\n---\nT\n", line: 2, key: "max_cost_usd", msg: "found a string"},
		{name: "max_cost_usd infinite", data: "---\nmax_cost_usd: .inf\n---\nT\n", line: 2, key: "max_cost_usd", msg: "must be a positive amount of dollars"},
		{name: "duration without unit", data: "---\ntimeout: 30\n---\nT\n", line: 2, key: "timeout", msg: `duration "30" has no unit`},
		{name: "zero duration", data: "---\nquestion_timeout: 0s\n---\nT\n", line: 2, key: "question_timeout", msg: "must be positive"},
		{name: "reminder after timeout", data: "---\nquestion_timeout: 1h\nremind_every: 1h\n---\nT\n", line: 3, key: "remind_every", msg: "shorter than question_timeout"},
		{name: "reminder every 1ms", data: "---\nremind_every: 1ms\n---\nT\n", line: 2, key: "remind_every", msg: "must be at least 1m0s"},
		{name: "timeout of 1ms", data: "---\nquestion_timeout: 1ms\n---\nT\n", line: 2, key: "question_timeout", msg: "must be at least 1s"},
		{name: "answers as a list", data: "---\nanswers: [a]\n---\nT\n", line: 2, key: "answers", msg: "want a mapping from a question's header or text to its answer, found a list"},
		{name: "empty answer", data: "---\nanswers:\n  Database:\n---\nT\n", line: 3, key: `answers["Database"]`, msg: "must not be empty"},
		{name: "answered twice", data: "---\nanswers:\n  DB: a\n  db : b\n---\nT\n", line: 4, key: `answers["db"]`, msg: "answered twice (first on line 3)"},
		{name: "answer is a mapping", data: "---\nanswers:\n  DB: {a: b}\n---\nT\n", line: 3, key: `answers["DB"]`, msg: "want a string, found a mapping"},
		{name: "unknown escalation", data: "---\nescalate_to: pager\n---\nT\n", line: 2, key: "escalate_to", msg: `unknown surface "pager"`},
		{name: "escalation already a surface", data: "---\nsurfaces: [terminal, discord]\nescalate_to: discord\n---\nT\n", line: 3, key: "escalate_to", msg: "already one of surfaces"},
		{name: "unknown on_timeout", data: "---\non_timeout: retry\n---\nT\n", line: 2, key: "on_timeout", msg: `unknown action "retry"`},
		{name: "default without option", data: "---\non_timeout: default\n---\nT\n", line: 2, key: "on_timeout", msg: "needs the option"},
		{name: "default with an empty option", data: "---\non_timeout: {action: default, option: ''}\n---\nT\n", line: 2, key: "on_timeout.option", msg: "must not be empty"},
		{name: "option for fail", data: "---\non_timeout: {action: fail, option: x}\n---\nT\n", line: 2, key: "on_timeout.option", msg: "only on_timeout action default"},
		{name: "on_timeout without action", data: "---\non_timeout: {option: x}\n---\nT\n", line: 2, key: "on_timeout.action", msg: "missing"},
		{name: "on_timeout unknown key", data: "---\non_timeout: {action: fail, when: x}\n---\nT\n", line: 2, key: "on_timeout.when", msg: "unknown key"},
		{name: "on_timeout as a list", data: "---\non_timeout: [fail]\n---\nT\n", line: 2, key: "on_timeout", msg: "want one of fail, default, decide, skip, or {action: default, option: …}, found a list"},
		{name: "missing body", data: "---\nname: x\n---\n\n  \n", line: 3, msg: "missing body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if path == "" {
				path = "e.md"
			}
			_, err := Parse(path, []byte(tt.data))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v (%T), want Errors", err, err)
			}
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), err)
			}
			e := errs[0]
			if e.File != path || e.Line != tt.line || e.Key != tt.key || !strings.Contains(e.Err.Error(), tt.msg) {
				t.Errorf("error = %#v\nwant file %q line %d key %q and a message with %q", e, path, tt.line, tt.key, tt.msg)
			}
		})
	}
}

// TestParseMixedErrors checks that every problem of a file is reported, in
// line order, with its line and key.
func TestParseMixedErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "mixed-errors.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(path, data)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error = %v, want Errors", err)
	}
	want := []struct {
		line int
		key  string
		msg  string
	}{
		{2, "name", "not a valid name"},
		{3, "schedule", "above maximum"},
		{6, "surfaces[1]", `unknown surface "matrix"`},
		{7, "surfaces[2].github.colour", "unknown key"},
		{7, "surfaces[2].github.issue", "must be positive"},
		{8, "surfaces[3]", "terminal is listed twice (first on line 5)"},
		{9, "workdir", "must not be empty"},
		{11, "max_turns", "whole number"},
		{12, "timeout", `duration "10" has no unit`},
		{13, "idle_timeout", "must be positive"},
		{14, "permission_mode", `want one of default, acceptEdits, auto, bypassPermissions, dontAsk, manual, plan, got "yolo"`},
		{17, `answers["database"]`, "answered twice (first on line 16)"},
		{19, "remind_every", "shorter than question_timeout"},
		{20, "escalate_to", `unknown surface "pager"`},
		{21, "on_timeout", "needs the option"},
		{22, "retries", "unknown key"},
		{23, "timeout", "duplicate key (first set on line 12)"},
		{24, "", "missing body"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		e := errs[i]
		if e.File != path || e.Line != w.line || e.Key != w.key || !strings.Contains(e.Err.Error(), w.msg) {
			t.Errorf("error %d = %v\nwant %s:%d: %s: …%s…", i, e, path, w.line, w.key, w.msg)
		}
	}
	// The text form names file, line and key.
	if first := strings.SplitN(err.Error(), "\n", 2)[0]; !strings.HasPrefix(first, path+":2: name: ") {
		t.Errorf("first line = %q", first)
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "a.md", Line: 3, Key: "k", Err: errors.New("bad")}, "a.md:3: k: bad"},
		{Error{File: "a.md", Err: errors.New("bad")}, "a.md: bad"},
		{Error{Key: "serve.catch_up", Err: errors.New("bad")}, "serve.catch_up: bad"},
		{Error{Err: errors.New("bad")}, "bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if got := (Errors{{File: "a", Err: errors.New("x")}, {File: "b", Err: errors.New("y")}}).Error(); got != "a: x\nb: y" {
		t.Errorf("Errors.Error() = %q", got)
	}
}

func TestLoadDirExamples(t *testing.T) {
	t.Parallel()
	specs, err := LoadDir("examples")
	if err != nil {
		t.Fatalf("LoadDir(examples): %v", err)
	}
	names := map[string]Spec{}
	for _, s := range specs {
		names[s.Name] = s
	}
	if len(specs) != 4 || len(names) != 4 {
		t.Fatalf("got %d specs %v, want 4", len(specs), names)
	}
	if demo := names["add-login-page"]; demo.Schedule != "" || len(demo.Surfaces) != 1 || demo.Surfaces[0].Name != "terminal" {
		t.Errorf("add-login-page (make demo's spec) = %+v", demo)
	}
	deps, refactor, notes := names["nightly-deps"], names["refactor-payments"], names["release-notes"]
	if deps.Schedule == "" || deps.Surfaces[0].Override.Value == nil || deps.OnTimeout.Action != OnTimeoutSkip {
		t.Errorf("nightly-deps = %+v", deps)
	}
	if refactor.EscalateTo != "github" || refactor.OnTimeout != (OnTimeout{Action: OnTimeoutDefault, Option: "Keep the current API"}) || len(refactor.Surfaces) != 2 {
		t.Errorf("refactor-payments = %+v", refactor)
	}
	if notes.Schedule != "" || len(notes.Answers) != 3 || notes.Answers[2].Answer != "Added, Changed, Fixed" {
		t.Errorf("release-notes = %+v", notes)
	}
	// The examples show each on_timeout that lets the run go on, and a budget.
	if deps.Agent.MaxCostUSD != 3 || notes.OnTimeout.Action != OnTimeoutDecide {
		t.Errorf("nightly-deps max_cost_usd = %v, release-notes on_timeout = %+v", deps.Agent.MaxCostUSD, notes.OnTimeout)
	}
	for _, s := range specs {
		if s.Body == "" || s.WorkDir == "" && s.Name != "add-login-page" { // the demo spec runs where it is started
			t.Errorf("%s: body %q, workdir %q", s.Name, s.Body, s.WorkDir)
		}
		if _, err := NewScheduler([]Spec{s}, func(context.Context, Spec) error { return nil }, SchedulerOptions{}); err != nil {
			t.Errorf("%s: NewScheduler: %v", s.Name, err)
		}
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.md", "---\nname: same\n---\nA\n")
	write("b.md", "---\nmodel: x\nname: same\n---\nB\n")
	write("c.md", "---\nbogus: 1\n---\nC\n")
	write("d.md", "---\n---\nD\n")
	write("README.md", "# not a spec\n")
	write("notes.txt", "not a spec")
	if err := os.Mkdir(filepath.Join(dir, "sub.md"), 0o755); err != nil {
		t.Fatal(err)
	}

	specs, err := LoadDir(dir)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("LoadDir error = %v, want 2 Errors", err)
	}
	if e := errs[0]; e.File != filepath.Join(dir, "b.md") || e.Line != 3 || e.Key != "name" || !strings.Contains(e.Err.Error(), "already used by "+filepath.Join(dir, "a.md")) {
		t.Errorf("duplicate name error = %v", e)
	}
	if e := errs[1]; e.File != filepath.Join(dir, "c.md") || e.Key != "bogus" {
		t.Errorf("unknown key error = %v", e)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.Name+":"+s.Body)
	}
	if want := []string{"same:A", "d:D"}; !reflect.DeepEqual(got, want) {
		t.Errorf("specs = %v, want %v", got, want)
	}

	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadDir(missing) = %v, want not exist", err)
	}
	if specs, err := LoadDir(t.TempDir()); err != nil || len(specs) != 0 {
		t.Errorf("LoadDir(empty) = %v, %v", specs, err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.md"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "read spec") {
		t.Errorf("Load = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"examples/nightly-deps.md", "examples/refactor-payments.md", "examples/release-notes.md", "testdata/mixed-errors.md"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("---\n---\nT"))
	f.Add([]byte("---\nschedule: TZ=UTC\nsurfaces: [{github: {issue: 1}}]\n---\nT"))
	f.Add([]byte("---\na: &a [*a]\n---\n"))
	f.Add([]byte("---\nk: &o option\non_timeout: {action: fail, *o : x}\ngit: {pull_request: ~}\n---\nT"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.md", data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty Errors", err, err)
			}
			for _, e := range errs {
				if e.File != "f.md" || e.Err == nil || e.Line < 0 {
					t.Fatalf("bad error %#v", e)
				}
			}
			return
		}
		if s.Name == "" || s.Body == "" {
			t.Fatalf("parsed without error but name %q body %q", s.Name, s.Body)
		}
		if s.Schedule != "" {
			if _, err := ParseSchedule(s.Schedule); err != nil {
				t.Fatalf("schedule %q accepted by Parse: %v", s.Schedule, err)
			}
		}
		if s.OnTimeout.Action == OnTimeoutDefault && s.OnTimeout.Option == "" {
			t.Fatal("on_timeout default without an option")
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("examples/refactor-payments.md")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("refactor-payments.md", data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseSameWordingAsConfig: a problem reads the same in a spec and in
// the configuration, both being decoded by internal/yamlfile.
func TestParseSameWordingAsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec, config string
	}{
		{"duplicate key", "model: a\nmodel: b\n", "agent:\n  model: a\n  model: b\n"},
		{"key not a plain name", "? [a]\n: b\n", "agent:\n  ? [a]\n  : b\n"},
		{"merge key", "<<: {model: x}\n", "agent:\n  <<: {model: x}\n"},
		{"unknown key", "modle: x\n", "agent:\n  modle: x\n"},
		{"wrong type", "model: [a]\n", "agent:\n  model: [a]\n"},
		{"fraction for a whole number", "max_turns: 1.5\n", "agent:\n  max_turns: 1.5\n"},
		{"duration without a unit", "timeout: 30\n", "agent:\n  timeout: 30\n"},
		{"bad permission mode", "permission_mode: yolo\n", "agent:\n  permission_mode: yolo\n"},
		{"tools not a list", "allowed_tools: {a: b}\n", "agent:\n  allowed_tools: {a: b}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("s.md", []byte("---\n"+tc.spec+"---\nT\n"))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("spec: %v, want one problem", err)
			}
			cfg, cerr := config.ParseEnv(strings.NewReader(tc.config), "c.yaml", func(string) (string, bool) { return "", false })
			if cerr == nil {
				cerr = cfg.Validate()
			}
			var want *Error
			for _, e := range config.Errors(cerr) {
				if errors.As(e, &want) && strings.HasPrefix(want.Key, "agent") {
					break
				}
				want = nil
			}
			if want == nil {
				t.Fatalf("config: %v, want a problem at agent", cerr)
			}
			if got := errs[0].Err.Error(); got != want.Err.Error() {
				t.Errorf("spec says %q, config says %q", got, want.Err.Error())
			}
		})
	}
}
