package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-dev/orchestrator/internal/yamlfile"
)

const examplePath = "../../config.example.yaml"

func env(kv ...string) LookupFunc {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// exampleEnv sets the variables config.example.yaml needs.
var exampleEnv = env("HOME", "/home/tester", "GITHUB_TOKEN", "ghp_test", "DISCORD_BOT_TOKEN", "discord-test")

func TestDefaultEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		lookup LookupFunc
		want   string
	}{
		{"xdg", env("XDG_STATE_HOME", "/x/state", "HOME", "/home/u"), "/x/state/orchestrator"},
		{"relative xdg ignored", env("XDG_STATE_HOME", "state", "HOME", "/home/u"), "/home/u/.local/state/orchestrator"},
		{"home", env("HOME", "/home/u"), "/home/u/.local/state/orchestrator"},
		{"none", env(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultEnv(tt.lookup)
			if cfg.StateDir != filepath.FromSlash(tt.want) {
				t.Errorf("StateDir = %q, want %q", cfg.StateDir, tt.want)
			}
		})
	}
	cfg := DefaultEnv(env("HOME", "/home/u"))
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	noHome := DefaultEnv(env())
	if err := noHome.Validate(); err == nil || !strings.Contains(err.Error(), "state_dir: required") {
		t.Errorf("defaults without HOME: got %v, want state_dir: required", err)
	}
}

// TestExample checks that config.example.yaml parses and validates, with
// the GitHub and Discord surfaces off as written and turned on.
func TestExample(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_test")
	t.Setenv("DISCORD_BOT_TOKEN", "discord-test")
	t.Setenv("HOME", t.TempDir())
	cfg, err := LoadEnv(examplePath, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("example does not validate:\n%v", err)
	}
	cfg.Surfaces.GitHub.Enabled = true
	cfg.Surfaces.Discord.Enabled = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("example with github and discord enabled does not validate:\n%v", err)
	}
	if cfg.Surfaces.GitHub.Token != "ghp_test" || cfg.Surfaces.Discord.Token != "discord-test" {
		t.Errorf("tokens not expanded: %q %q", cfg.Surfaces.GitHub.Token, cfg.Surfaces.Discord.Token)
	}
}

var (
	yamlFields      = yamlfile.Fields
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// yamlKeys lists the dotted yaml keys of the struct tree of t.
func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for name, i := range yamlFields(t) {
		key := joinKey(prefix, name)
		keys = append(keys, key)
		f := t.FieldByIndex(i).Type
		if f.Kind() == reflect.Struct && !reflect.PointerTo(f).Implements(unmarshalerType) {
			keys = append(keys, yamlKeys(f, key)...)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestExampleHasEveryKey checks that every key of Config is written (not
// only mentioned in a comment) in config.example.yaml.
func TestExampleHasEveryKey(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(examplePath, exampleEnv)
	if err != nil {
		t.Fatal(err)
	}
	keys := yamlKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 60 {
		t.Fatalf("found only %d keys: %v", len(keys), keys)
	}
	for _, key := range keys {
		if cfg.Line(key) == 0 {
			t.Errorf("key %s is missing from config.example.yaml", key)
		}
	}
}

// TestExampleDefaults checks that the example shows the defaults, apart from
// the keys it sets on purpose.
func TestExampleDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(examplePath, exampleEnv)
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	diff(reflect.ValueOf(cfg), reflect.ValueOf(DefaultEnv(exampleEnv)), "", &diffs)
	want := []string{
		"agent.allowed_tools", "agent.env",
		"specs.dir", // made relative to the example's directory
		"surfaces.discord.allow_users", "surfaces.discord.channel_id", "surfaces.discord.token",
		"surfaces.github.allow", "surfaces.github.labels", "surfaces.github.repo", "surfaces.github.token",
		"surfaces.slack.allow_users", "surfaces.slack.channel",
	}
	if !slices.Equal(diffs, want) {
		t.Errorf("example differs from the defaults in\n%v\nwant\n%v", diffs, want)
	}
}

func diff(a, b reflect.Value, path string, out *[]string) {
	if a.Kind() == reflect.Struct {
		for name, i := range yamlFields(a.Type()) {
			diff(a.FieldByIndex(i), b.FieldByIndex(i), joinKey(path, name), out)
		}
		if path == "" {
			slices.Sort(*out)
		}
		return
	}
	if (a.Kind() == reflect.Map || a.Kind() == reflect.Slice) && a.Len() == 0 && b.Len() == 0 {
		return // nil and empty are the same here
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, path)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	in := `
state_dir: /var/lib/orch
log: {level: debug, format: json}
agent:
  command: /opt/claude
  model: ${MODEL:-sonnet}
  allowed_tools: ["Bash(go test:*)", Read]
  max_turns: ${TURNS}
  timeout: 2h
  idle_timeout: 90s
  max_line_bytes: 1MiB
  env: {FOO: "${FOO}"}
  mcp_servers:
    db: {command: python, args: [-m, db], env: {URL: "${FOO}"}}
run:
  rate_limit_backoff: 1m30s
  answer_max_bytes: 4096
surfaces:
  terminal: {enabled: false}
  github:
    enabled: true
    token: ${TOKEN}
    repo: o/r
serve:
  listen: ":9090"
  catch_up: once
  lease_ttl: 1m
`
	cfg, err := ParseEnv(strings.NewReader(in), "c.yaml", env("TURNS", "7", "FOO", "bar", "TOKEN", "tok", "HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"state_dir", cfg.StateDir, "/var/lib/orch"},
		{"log.level", cfg.Log.Level, "debug"},
		{"agent.command", cfg.Agent.Command, "/opt/claude"},
		{"agent.harness (default)", cfg.Agent.Harness, "claude"},
		{"agent.model", cfg.Agent.Model, "sonnet"},
		{"agent.allowed_tools", cfg.Agent.AllowedTools, []string{"Bash(go test:*)", "Read"}},
		{"agent.max_turns", cfg.Agent.MaxTurns, 7},
		{"agent.timeout", cfg.Agent.Timeout.Std(), 2 * time.Hour},
		{"agent.idle_timeout", cfg.Agent.IdleTimeout.Std(), 90 * time.Second},
		{"agent.max_line_bytes", cfg.Agent.MaxLineBytes, ByteSize(1 << 20)},
		{"agent.env", cfg.Agent.Env, map[string]string{"FOO": "bar"}},
		{"agent.mcp_servers", cfg.Agent.MCPServers, map[string]any{"db": map[string]any{"command": "python", "args": []any{"-m", "db"}, "env": map[string]any{"URL": "bar"}}}},
		{"run.rate_limit_backoff", cfg.Run.RateLimitBackoff.Std(), 90 * time.Second},
		{"run.max_question_rounds (default)", cfg.Run.MaxQuestionRounds, 20},
		{"run.answer_max_bytes", cfg.Run.AnswerMaxBytes, ByteSize(4096)},
		{"surfaces.terminal.enabled", cfg.Surfaces.Terminal.Enabled, false},
		{"surfaces.github.token", cfg.Surfaces.GitHub.Token, "tok"},
		{"surfaces.github.poll_interval (default)", cfg.Surfaces.GitHub.PollInterval.Std(), 15 * time.Second},
		{"surfaces.discord.thread_per_run (default)", cfg.Surfaces.Discord.ThreadPerRun, true},
		{"serve.listen", cfg.Serve.Listen, ":9090"},
		{"serve.catch_up", cfg.Serve.CatchUp, "once"},
		{"serve.max_concurrent_runs (default)", cfg.Serve.MaxConcurrentRuns, 2},
		{"serve.lease_ttl", cfg.Serve.LeaseTTL.Std(), time.Minute},
		{"serve.lease_ttl (default)", DefaultEnv(env("HOME", "/h")).Serve.LeaseTTL.Std(), 30 * time.Second},
		{"line of agent.max_turns", cfg.Line("agent.max_turns"), 8},
		{"source", cfg.Source(), "c.yaml"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestParse_Empty(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "# only a comment\n", "---\n", "log:\n"} {
		cfg, err := ParseEnv(strings.NewReader(in), "e.yaml", env("HOME", "/h"))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		want := DefaultEnv(env("HOME", "/h"))
		var diffs []string
		diff(reflect.ValueOf(cfg), reflect.ValueOf(want), "", &diffs)
		if len(diffs) > 0 {
			t.Errorf("%q: differs from defaults in %v", in, diffs)
		}
	}
}

func TestParse_Errors(t *testing.T) {
	t.Parallel()
	lookup := env("SECRET", "hunter2", "EMPTY", "")
	for _, tt := range []struct {
		name string
		in   string
		want []string // one entry per expected error, each a substring
	}{
		{"unknown top-level key", "log: {level: info}\nstatedir: /x\n",
			[]string{`f.yaml:2: statedir: unknown key (did you mean "state_dir"?)`}},
		{"unknown nested key", "surfaces:\n  github:\n    tokne: x\n",
			[]string{`f.yaml:3: surfaces.github.tokne: unknown key (did you mean "token"?)`}},
		{"unknown key far from any", "agent:\n  zzzzzzzzzz: 1\n",
			[]string{`f.yaml:2: agent.zzzzzzzzzz: unknown key (known keys: allowed_tools, append_system_prompt,`}},
		{"two unknown keys", "a: 1\nlog:\n  lvl: x\n",
			[]string{`f.yaml:1: a: unknown key`, `f.yaml:3: log.lvl: unknown key`}},
		{"duplicate key", "log:\n  level: info\n  level: debug\n",
			[]string{`f.yaml:3: log.level: duplicate key (first set on line 2)`}},
		{"wrong type int", "agent:\n  max_turns: lots\n",
			[]string{`f.yaml:2: agent.max_turns: want an integer, found a string "lots"`}},
		{"max_cost_usd as a string", "agent:\n  max_cost_usd: $5\n",
			[]string{`f.yaml:2: agent.max_cost_usd: want a number, found a string "$5"`}},
		{"wrong type bool", "surfaces:\n  terminal:\n    enabled: maybe\n",
			[]string{`f.yaml:3: surfaces.terminal.enabled: want true or false, found a string "maybe"`}},
		{"list for string", "agent:\n  model: [a, b]\n",
			[]string{`f.yaml:2: agent.model: want a string, found a list`}},
		{"string for list", "agent:\n  allowed_tools: Read\n",
			[]string{`f.yaml:2: agent.allowed_tools: want a list, found a string "Read"`}},
		{"scalar for section", "agent: claude\n",
			[]string{`f.yaml:1: agent: want a mapping of keys, found a string`}},
		{"list at top", "- a\n", []string{`f.yaml:1: want a mapping of keys, found a list`}},
		{"duration without unit", "agent:\n  timeout: 30\n",
			[]string{`f.yaml:2: agent.timeout: duration "30" has no unit (write 30s or 30m)`}},
		{"bad duration", "run:\n  rate_limit_backoff: soon\n",
			[]string{`f.yaml:2: run.rate_limit_backoff: invalid duration "soon"`}},
		{"bad size", "agent:\n  max_line_bytes: big\n",
			[]string{`f.yaml:2: agent.max_line_bytes: invalid size "big"`}},
		{"unset variable", "surfaces:\n  github:\n    token: ${GITHUB_TOKEN_UNSET}\n",
			[]string{`f.yaml:3: surfaces.github.token: environment variable GITHUB_TOKEN_UNSET is not set`}},
		{"unset variable in list", "agent:\n  allowed_tools:\n    - Read\n    - ${NOPE}\n",
			[]string{`f.yaml:4: agent.allowed_tools[1]: environment variable NOPE is not set`}},
		{"unterminated", "agent:\n  model: ${MODEL\n",
			[]string{`f.yaml:2: agent.model: "${" without a closing "}"`}},
		{"bad variable name", "agent:\n  model: ${1X}\n",
			[]string{`f.yaml:2: agent.model: invalid variable name "1X"`}},
		{"secret not shown", "agent:\n  max_turns: ${SECRET}\n",
			[]string{`f.yaml:2: agent.max_turns: want an integer, found a string`}},
		{"syntax error", "log:\n  level: [info\n",
			[]string{`f.yaml:`, `invalid YAML`}},
		{"tab indentation", "log:\n\tlevel: info\n", []string{`f.yaml:2: invalid YAML: found character that cannot start any token`}},
		{"two documents", "log: {}\n---\nlog: {}\n", []string{`f.yaml:2: more than one YAML document`}},
		{"non-scalar key", "? [a]\n: b\n", []string{`f.yaml:1: keys must be plain names, found a list`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseEnv(strings.NewReader(tt.in), "f.yaml", lookup)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows a variable's value: %v", err)
			}
			errs := Errors(err)
			if tt.name == "syntax error" {
				errs = []error{err, err}
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, errs[i], w)
				}
				var ce *Error
				if !errors.As(errs[i], &ce) || ce.File != "f.yaml" {
					t.Errorf("error %d is not a *Error naming the file: %#v", i, errs[i])
				}
			}
		})
	}
}

func TestParse_UnsetErrorType(t *testing.T) {
	t.Parallel()
	_, err := ParseEnv(strings.NewReader("surfaces: {discord: {token: \"${DT}\"}}"), "f.yaml", env())
	var ue *UnsetError
	if !errors.As(err, &ue) || ue.Name != "DT" {
		t.Fatalf("got %v, want an *UnsetError for DT", err)
	}
}

func TestParse_FromProcessEnv(t *testing.T) {
	t.Setenv("ORCH_TEST_MODEL", "opus")
	cfg, err := ParseEnv(strings.NewReader("agent: {model: '${ORCH_TEST_MODEL}'}"), "p.yaml", os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Model != "opus" {
		t.Errorf("model = %q", cfg.Agent.Model)
	}
}

func TestParse_ExpandKeepsTypes(t *testing.T) {
	t.Parallel()
	in := `
agent:
  max_turns: ${N}
  model: "${N}"
  append_system_prompt: "cost is $$5, $${NOT_A_VAR} stays"
  command: ${EMPTY:-claude-dev}
  workdir: ${EMPTY}
surfaces:
  discord:
    channel_id: ${CHAN}
    thread_per_run: ${F}
`
	cfg, err := ParseEnv(strings.NewReader(in), "f.yaml", env("N", "12", "EMPTY", "", "CHAN", "123456789012345678", "F", "false"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.MaxTurns != 12 || cfg.Agent.Model != "12" {
		t.Errorf("max_turns = %d, model = %q", cfg.Agent.MaxTurns, cfg.Agent.Model)
	}
	if want := "cost is $$5, ${NOT_A_VAR} stays"; cfg.Agent.AppendSystemPrompt != want {
		t.Errorf("append_system_prompt = %q, want %q", cfg.Agent.AppendSystemPrompt, want)
	}
	if cfg.Agent.Command != "claude-dev" || cfg.Agent.Workdir != "" {
		t.Errorf("command = %q, workdir = %q", cfg.Agent.Command, cfg.Agent.Workdir)
	}
	if cfg.Surfaces.Discord.ChannelID != "123456789012345678" || cfg.Surfaces.Discord.ThreadPerRun {
		t.Errorf("discord = %+v", cfg.Surfaces.Discord)
	}
}

func TestParse_Anchors(t *testing.T) {
	t.Parallel()
	in := "x-tools: &tools [Read, Edit]\n"
	if _, err := ParseEnv(strings.NewReader(in), "f.yaml", env()); err == nil {
		t.Error("unknown x-tools key accepted")
	}
	in = "agent:\n  allowed_tools: &tools [Read, Edit]\n  disallowed_tools: *tools\n"
	cfg, err := ParseEnv(strings.NewReader(in), "f.yaml", env())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Agent.DisallowedTools, []string{"Read", "Edit"}) {
		t.Errorf("disallowed_tools = %v", cfg.Agent.DisallowedTools)
	}
}

func TestParse_TooLarge(t *testing.T) {
	t.Parallel()
	in := "# " + strings.Repeat("x", MaxFileSize)
	if _, err := ParseEnv(strings.NewReader(in), "big.yaml", env()); err == nil || !strings.Contains(err.Error(), "big.yaml: file is larger") {
		t.Errorf("got %v", err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "orchestrator.yaml")
	in := "state_dir: state\nspecs: {dir: ./my-specs}\nagent:\n  mcp_config: ~/mcp.json\n  workdir: /abs/work\n"
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadEnv(path, env("HOME", "/home/u"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		{cfg.StateDir, filepath.Join(dir, "state")},
		{cfg.Specs.Dir, filepath.Join(dir, "my-specs")},
		{cfg.Agent.MCPConfig, filepath.FromSlash("/home/u/mcp.json")},
		{cfg.Agent.Workdir, "/abs/work"},
		{cfg.Surfaces.GitHub.App.PrivateKeyFile, ""},
	} {
		if c[0] != c[1] {
			t.Errorf("got %q, want %q", c[0], c[1])
		}
	}

	// Defaults are not made relative to the file.
	if err := os.WriteFile(path, []byte("log: {level: warn}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = LoadEnv(path, env("HOME", "/home/u")); err != nil || cfg.Specs.Dir != DefaultSpecsDir {
		t.Errorf("specs.dir = %q, %v", cfg.Specs.Dir, err)
	}

	if _, err := LoadEnv(filepath.Join(dir, "missing.yaml"), env()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want ErrNotExist", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	base := func() Config { return DefaultEnv(env("HOME", "/h")) }
	gh := func(c *Config) {
		c.Surfaces.GitHub.Enabled = true
		c.Surfaces.GitHub.Repo = "o/r"
		c.Surfaces.GitHub.Token = "t"
	}
	dc := func(c *Config) {
		c.Surfaces.Discord.Enabled = true
		c.Surfaces.Discord.Token = "t"
		c.Surfaces.Discord.ChannelID = "123"
		c.Surfaces.Discord.AllowUsers = []string{"456"}
	}
	for _, tt := range []struct {
		name   string
		modify func(*Config)
		want   []string // substrings, one per expected error, in order
	}{
		{"defaults", func(*Config) {}, nil},
		{"github ok", gh, nil},
		{"github app ok", func(c *Config) {
			gh(c)
			c.Surfaces.GitHub.Token = ""
			c.Surfaces.GitHub.App = GitHubApp{ID: 1, InstallationID: 2, PrivateKeyFile: "k.pem"}
		}, nil},
		{"discord ok", dc, nil},
		{"discord roles only ok", func(c *Config) {
			dc(c)
			c.Surfaces.Discord.AllowUsers = nil
			c.Surfaces.Discord.AllowRoles = []string{"9"}
		}, nil},
		{"disabled surfaces are not checked", func(c *Config) { c.Surfaces.GitHub.Repo = "bad" }, nil},
		{"log", func(c *Config) { c.Log.Level = "verbose"; c.Log.Format = "xml" }, []string{
			`log.level: want one of debug, info, warn, error, got "verbose"`,
			`log.format: want one of text, json, got "xml"`}},
		{"agent", func(c *Config) {
			c.Agent.Command = " "
			c.Agent.Harness = "gpt"
			c.Agent.PermissionMode = "yolo"
			c.Agent.AllowedTools = []string{"Read", ""}
			c.Agent.MaxTurns = -1
			c.Agent.Timeout = -1
			c.Agent.MaxLineBytes = 1024
			c.Agent.Env = map[string]string{"A=B": "x", "OK": "y"}
		}, []string{
			"agent.command: required",
			`agent.harness: want one of claude, claw, got "gpt"`,
			`agent.permission_mode: want one of`,
			"agent.allowed_tools[1]: must not be empty",
			"agent.max_turns: must not be negative",
			"agent.timeout: must not be negative",
			"agent.max_line_bytes: must be at least 64KiB, got 1KiB",
			"agent.env.A=B: not a valid environment variable name"}},
		{"max_cost_usd negative", func(c *Config) { c.Agent.MaxCostUSD = -0.5 }, []string{
			"agent.max_cost_usd: must be a positive amount of dollars, or 0 for no limit"}},
		{"mcp servers", func(c *Config) {
			c.Agent.MCPServers = map[string]any{
				"a": map[string]any{"command": "x"},
				"b": map[string]any{"type": "http", "url": "http://127.0.0.1/mcp"},
				"c": "nope",
				"d": map[string]any{"args": []any{"x"}},
				"e": map[string]any{"type": "grpc", "url": "x"},
				"f": map[string]any{"command": "x", "args": []any{"a", 1}, "env": map[string]any{"N": 1, "S": "s"}, "headers": "h"},
			}
		}, []string{"agent.mcp_servers.c: want a mapping", "agent.mcp_servers.d: needs command", "agent.mcp_servers.e.type: want one of stdio, http, sse",
			"agent.mcp_servers.f.args[1]: want a string", "agent.mcp_servers.f.env.N: want a string", "agent.mcp_servers.f.headers: want a mapping"}},
		{"run", func(c *Config) {
			c.Run = Run{MaxQuestionRounds: 0, MaxCorrections: -1, RateLimitRetries: -1, RateLimitBackoff: -1, AnswerMaxBytes: 0}
		}, []string{"run.max_question_rounds: must be at least 1", "run.max_corrections", "run.rate_limit_retries", "run.rate_limit_backoff", "run.answer_max_bytes"}},
		{"github needs repo and auth", func(c *Config) { c.Surfaces.GitHub.Enabled = true }, []string{
			"surfaces.github.repo: required", "surfaces.github.token: set token or app"}},
		{"github both token and app", func(c *Config) { gh(c); c.Surfaces.GitHub.App.ID = 1 }, []string{
			"surfaces.github.app: set token or app, not both"}},
		{"github app incomplete", func(c *Config) { gh(c); c.Surfaces.GitHub.Token = ""; c.Surfaces.GitHub.App.ID = 1 }, []string{
			"surfaces.github.app.installation_id: required", "surfaces.github.app.private_key_file: required"}},
		{"github values", func(c *Config) {
			gh(c)
			c.Surfaces.GitHub.Repo = "just-a-name"
			c.Surfaces.GitHub.BaseURL = "https://user:secret@/"
			c.Surfaces.GitHub.PollInterval = 0
			c.Surfaces.GitHub.AllowOnly = true
		}, []string{`surfaces.github.repo: want "owner/name", got "just-a-name"`, "surfaces.github.base_url: want an absolute http or https URL",
			"surfaces.github.poll_interval: must be above zero", "surfaces.github.allow: empty while allow_only is true"}},
		{"discord needs token channel and people", func(c *Config) { c.Surfaces.Discord.Enabled = true }, []string{
			"surfaces.discord.token: required", "surfaces.discord.channel_id: required", "surfaces.discord.allow_users: allow_users and allow_roles are both empty: nobody could answer"}},
		{"discord ids and urls", func(c *Config) {
			dc(c)
			c.Surfaces.Discord.ChannelID = "general"
			c.Surfaces.Discord.AllowRoles = []string{"admins"}
			c.Surfaces.Discord.GatewayURL = "http://127.0.0.1:1"
		}, []string{"surfaces.discord.channel_id: want a numeric Discord ID", `surfaces.discord.allow_roles[0]: want a numeric Discord role ID, got "admins"`,
			"surfaces.discord.gateway_url: want an absolute ws or wss URL"}},
		{"discord token, user ids and api url", func(c *Config) {
			dc(c)
			c.Surfaces.Discord.Token = "Bot abc def"
			c.Surfaces.Discord.AllowUsers = []string{"456", "alice"}
			c.Surfaces.Discord.APIURL = "http://"
		}, []string{"surfaces.discord.token: contains white space", `surfaces.discord.allow_users[1]: want a numeric Discord user ID, got "alice"`,
			"surfaces.discord.api_url: want an absolute http or https URL"}},
		{"discord blank token, api scheme", func(c *Config) {
			dc(c)
			c.Surfaces.Discord.Token = "  "
			c.Surfaces.Discord.APIURL = "ftp://x"
		}, []string{"surfaces.discord.token: required when the Discord surface is enabled (set it to ${DISCORD_BOT_TOKEN}", "surfaces.discord.api_url: want an absolute http or https URL"}},
		{"discord Bot prefix and overrides ok", func(c *Config) {
			dc(c)
			c.Surfaces.Discord.Token = "Bot abc"
			c.Surfaces.Discord.APIURL, c.Surfaces.Discord.GatewayURL = "http://127.0.0.1:1/x", "wss://gw.example/"
		}, nil},
		{"specs and serve", func(c *Config) {
			c.Specs.Dir = ""
			c.Serve = Serve{Listen: "8080", MaxConcurrentRuns: 0, CatchUp: "all"}
		}, []string{"specs.dir: required", "serve.listen: want host:port", "serve.max_concurrent_runs: must be at least 1",
			"serve.lease_ttl: must be at least 3s, got 0s", `serve.catch_up: want one of skip, once, got "all"`}},
		{"lease_ttl below the floor", func(c *Config) { c.Serve.LeaseTTL = Duration(2900 * time.Millisecond) }, []string{
			"serve.lease_ttl: must be at least 3s, got 2.9s"}},
		{"lease_ttl negative", func(c *Config) { c.Serve.LeaseTTL = Duration(-time.Second) }, []string{
			"serve.lease_ttl: must be at least 3s, got -1s"}},
		{"lease_ttl at the floor ok", func(c *Config) { c.Serve.LeaseTTL = MinLeaseTTL }, nil},
		{"bad port", func(c *Config) { c.Serve.Listen = "127.0.0.1:http" }, []string{`serve.listen: invalid port "http"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := base()
			tt.modify(&c)
			errs := Errors(c.Validate())
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errors.Join(errs...))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, errs[i], w)
				}
				if strings.Contains(errs[i].Error(), "secret") {
					t.Errorf("error %d shows a secret: %q", i, errs[i])
				}
			}
		})
	}
}

// TestValidate_Lines checks that Validate names the file and line of a key
// set in a file, or of its closest parent.
func TestValidate_Lines(t *testing.T) {
	t.Parallel()
	in := "log:\n  level: loud\nsurfaces:\n  discord:\n    enabled: true\n    token: t\n    channel_id: \"1\"\n    allow_users:\n      - bob\n"
	cfg, err := ParseEnv(strings.NewReader(in), "v.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{`v.yaml:2: log.level: want one of`, `v.yaml:8: surfaces.discord.allow_users[0]: want a numeric Discord user ID, got "bob"`} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}
	cfg.Serve.CatchUp = "never"
	if got := fmt.Sprint(Errors(cfg.Validate())); !strings.Contains(got, "v.yaml: serve.catch_up: want one of") {
		t.Errorf("a key not in the file: %s", got)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	lookup := env("A", "a", "EMPTY", "", "B_2", "b")
	for _, tt := range []struct{ in, want, err string }{
		{"", "", ""},
		{"plain", "plain", ""},
		{"${A}", "a", ""},
		{"x${A}y${B_2}z", "xaybz", ""},
		{"${EMPTY}", "", ""},
		{"${EMPTY:-d}", "d", ""},
		{"${UNSET:-d e f}", "d e f", ""},
		{"${UNSET:-}", "", ""},
		{"${A:-d}", "a", ""},
		{"$A $ $$ $5", "$A $ $$ $5", ""},
		{"$${A}", "${A}", ""},
		{"$$${A}", "$${A}", ""}, // scanned left to right: $ then $${
		{"${UNSET}", "", "environment variable UNSET is not set"},
		{"${A", "", `"${" without a closing "}"`},
		{"${}", "", `invalid variable name ""`},
		{"${A B}", "", `invalid variable name "A B"`},
		{"${A-d}", "", `invalid variable name "A-d"`},
	} {
		got, err := Expand(tt.in, lookup)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15s", 15 * time.Second, true},
		{"2h", 2 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{" 0 ", 0, true},
		{"0s", 0, true},
		{"-5s", -5 * time.Second, true},
		{"15", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"fast", 0, false},
		{"90d", 90 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"-2d", -48 * time.Hour, true},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"1d-2h", 0, false},
		{"2h1d", 0, false},
		{"99999999999d", 0, false},
	} {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got.Std() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	if s := Duration(90 * time.Second).String(); s != "1m30s" {
		t.Errorf("String = %q", s)
	}
}

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"8192", 8192, true},
		{"64MiB", 64 << 20, true},
		{"64 MiB", 64 << 20, true},
		{"512kib", 512 << 10, true},
		{"1GiB", 1 << 30, true},
		{"10MB", 10_000_000, true},
		{"3k", 3 << 10, true},
		{"100B", 100, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"1.5MiB", 0, false},
		{"5TB", 0, false},
		{"99999999999999999999", 0, false},
		{"9999999999999GiB", 0, false},
	} {
		got, err := ParseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for b, s := range map[ByteSize]string{0: "0", 100: "100", 8192: "8KiB", 64 << 20: "64MiB", 1 << 30: "1GiB", 1500: "1500"} {
		if b.String() != s {
			t.Errorf("%d.String() = %q, want %q", int64(b), b.String(), s)
		}
	}
}

func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(examplePath); err == nil {
		f.Add(string(data))
	}
	f.Add("agent: {max_turns: ${N}, timeout: 2h}\n")
	f.Add("surfaces:\n  github:\n    tokne: x\n")
	f.Add("a: &x [1]\nb: *x\n")
	f.Add("log: {level: debug}\n---\nx: 1\n")
	lookup := env("N", "3", "GITHUB_TOKEN", "t", "DISCORD_BOT_TOKEN", "d", "HOME", "/h")
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseEnv(strings.NewReader(in), "fuzz.yaml", lookup)
		for _, e := range Errors(err) {
			if !strings.HasPrefix(e.Error(), "fuzz.yaml") {
				t.Errorf("error does not name the file: %v", e)
			}
		}
		_ = cfg.Validate()
	})
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "$${A}", "x${A:-d}y", "${", "$$$", "${A:-${B}}"} {
		f.Add(s)
	}
	lookup := env("A", "a")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Expand(in, lookup)
		if err == nil && !strings.Contains(in, "$") && out != in {
			t.Errorf("Expand(%q) = %q: text without $ changed", in, out)
		}
	})
}

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := ParseEnv(strings.NewReader(string(data)), "config.example.yaml", exampleEnv)
		if err != nil {
			b.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMCPConfigJSON: inline MCP servers, as YAML decodes them, encode to
// the JSON document the CLI's --mcp-config takes, as the executor writes it
// ({"mcpServers": servers}).
func TestMCPConfigJSON(t *testing.T) {
	t.Parallel()
	in := "agent:\n  mcp_servers:\n    db: {type: stdio, command: python, args: [-m, db], env: {N: 1}}\n    web: {type: http, url: \"http://127.0.0.1:1/mcp\"}\n"
	cfg, err := ParseEnv(strings.NewReader(in), "m.yaml", env())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(map[string]any{"mcpServers": cfg.Agent.MCPServers})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers":{"db":{"args":["-m","db"],"command":"python","env":{"N":1},"type":"stdio"},"web":{"type":"http","url":"http://127.0.0.1:1/mcp"}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if servers := DefaultEnv(env()).Agent.MCPServers; len(servers) != 0 {
		t.Errorf("no servers by default, got %v", servers)
	}
}

// TestValidate_PassEnv: agent.pass_env takes variable names and prefixes
// ending in "*"; anything else is an error naming the item.
func TestValidate_PassEnv(t *testing.T) {
	t.Parallel()
	in := "agent:\n  pass_env:\n    - AWS_*\n    - NPM_TOKEN\n    - bad-name\n    - \"*\"\n"
	cfg, err := ParseEnv(strings.NewReader(in), "p.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Agent.PassEnv, []string{"AWS_*", "NPM_TOKEN", "bad-name", "*"}) {
		t.Fatalf("pass_env %q", cfg.Agent.PassEnv)
	}
	got := fmt.Sprint(Errors(cfg.Validate()))
	for _, w := range []string{`p.yaml:2: agent.pass_env[2]: "bad-name" is not an environment variable name`, `p.yaml:2: agent.pass_env[3]: "*" is not`} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %s\nwant %q", got, w)
		}
	}
	if strings.Contains(got, "pass_env[0]") || strings.Contains(got, "pass_env[1]") {
		t.Errorf("a valid name refused: %s", got)
	}
}

// TestValidate_PollInterval1ns: a poll interval below the floor is refused
// with the file, line and the floor; a base_url on this machine has a
// lower floor, for tests.
func TestValidate_PollInterval1ns(t *testing.T) {
	t.Parallel()
	const in = "surfaces:\n  github:\n    enabled: true\n    token: t\n    repo: o/r\n    poll_interval: 1ns\n"
	cfg, err := ParseEnv(strings.NewReader(in), "p.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	errs := Errors(cfg.Validate())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "p.yaml:6: surfaces.github.poll_interval: must be at least 1s, got 1ns") {
		t.Fatalf("errors = %v", errs)
	}
	cfg.Surfaces.GitHub.PollInterval = Duration(100 * time.Millisecond)
	cfg.Surfaces.GitHub.BaseURL = "http://127.0.0.1:1234/"
	if err := cfg.Validate(); err != nil {
		t.Errorf("100ms against a local server: %v", err)
	}
	cfg.Surfaces.GitHub.PollInterval = 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "must be at least 10ms") {
		t.Errorf("1ns against a local server: %v", err)
	}
}

// TestValidate_LeaseTTL1s: a lease TTL below the floor is refused with
// the file, line, floor and value; an empty value keeps the default.
func TestValidate_LeaseTTL1s(t *testing.T) {
	t.Parallel()
	cfg, err := ParseEnv(strings.NewReader("serve:\n  listen: 127.0.0.1:8080\n  lease_ttl: 1s\n"), "l.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	errs := Errors(cfg.Validate())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "l.yaml:3: serve.lease_ttl: must be at least 3s, got 1s") {
		t.Fatalf("errors = %v", errs)
	}
	cfg, err = ParseEnv(strings.NewReader("serve:\n  lease_ttl: ${LEASE_TTL:-}\n"), "l.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Serve.LeaseTTL != DefaultLeaseTTL {
		t.Errorf("empty lease_ttl = %v, want the default %v", cfg.Serve.LeaseTTL, DefaultLeaseTTL)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("default lease_ttl: %v", err)
	}
}

// TestValidate_BypassPermissionsWithoutOptIn: permission_mode
// bypassPermissions needs dangerously_skip_permissions: true.
func TestValidate_BypassPermissionsWithoutOptIn(t *testing.T) {
	t.Parallel()
	cfg, err := ParseEnv(strings.NewReader("agent:\n  permission_mode: bypassPermissions\n"), "b.yaml", env("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "b.yaml:2: agent.permission_mode: bypassPermissions skips every permission check: it needs dangerously_skip_permissions: true") {
		t.Fatalf("Validate = %v", err)
	}
	cfg.Agent.DangerouslySkipPermissions = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("with the opt-in: %v", err)
	}
}

func TestServeScheduleFloor(t *testing.T) {
	t.Parallel()
	if got := (Serve{}).ScheduleFloor(); got != time.Minute {
		t.Errorf("zero: %v, want 1m", got)
	}
	if got := (Serve{MinScheduleInterval: Duration(time.Second)}).ScheduleFloor(); got != time.Second {
		t.Errorf("1s: %v", got)
	}
	if IsLoopbackListen(":8080") || IsLoopbackListen("0.0.0.0:1") || !IsLoopbackListen("127.0.0.1:0") || !IsLoopbackListen("[::1]:80") || !IsLoopbackListen("localhost:80") {
		t.Error("IsLoopbackListen")
	}
}

// TestDecodeOverride: a spec's override of a surface decodes into the
// surface's own block type, with the configuration's checks, refuses the
// keys a spec may not set, and applies over the configuration's block.
func TestDecodeOverride(t *testing.T) {
	t.Parallel()
	decode := func(in string) (Override, bool, yamlfile.Errors) {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
			t.Fatal(err)
		}
		d := &yamlfile.Decoder{File: "s.md", Offset: 1}
		o, ok := DecodeOverride(d, "github", doc.Content[0], "surfaces[0].github")
		return o, ok, d.Errs
	}
	o, ok, errs := decode("issue: 42\nlabels: [deps]\n")
	if !ok || len(errs) != 0 {
		t.Fatalf("ok %v, errors %v", ok, errs)
	}
	block := GitHub{Enabled: true, Repo: "acme/app", Token: "t", Labels: []string{"x"}, Allow: []string{"alice"}}
	o.Apply(&block)
	if block.Repo != "acme/app" || block.Issue != 42 || !slices.Equal(block.Labels, []string{"deps"}) || block.Token != "t" || block.Allow[0] != "alice" {
		t.Errorf("applied: %+v", block)
	}

	_, ok, errs = decode("token: ${X}\nrepo: nope\nbase_url: http://x\n")
	got := fmt.Sprint(errs)
	for _, want := range []string{
		"s.md:2: surfaces[0].github.token: cannot be set in a spec (a spec may set repo, issue, labels)",
		`s.md:3: surfaces[0].github.repo: want "owner/name", got "nope"`,
		"s.md:4: surfaces[0].github.base_url: cannot be set in a spec",
	} {
		if ok || !strings.Contains(got, want) {
			t.Errorf("ok %v, errors %s\nwant %q", ok, got, want)
		}
	}
	if keys := OverrideKeys("terminal"); len(keys) != 0 {
		t.Errorf("terminal override keys %v", keys)
	}
}

// TestRetention checks retention's defaults, its days, and that a negative
// one is refused by name.
func TestRetention(t *testing.T) {
	t.Parallel()
	d := DefaultEnv(env("HOME", "/home/u"))
	if d.Retention.Transcripts.Std() != 90*24*time.Hour || d.Retention.Runs.Std() != 90*24*time.Hour || d.Retention.Branches.Std() != 30*24*time.Hour {
		t.Fatalf("default retention = %+v", d.Retention)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte("state_dir: "+dir+"\nretention:\n  transcripts: 7d\n  runs: 0\n  branches: -1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadEnv(p, env("HOME", "/home/u"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retention.Transcripts.Std() != 7*24*time.Hour || cfg.Retention.Runs != 0 {
		t.Fatalf("retention = %+v", cfg.Retention)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "retention.branches") || !strings.Contains(err.Error(), "must not be negative") {
		t.Fatalf("Validate = %v, want retention.branches: must not be negative", err)
	}
}
