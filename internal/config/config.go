// Package config is the orchestrator's configuration file: its types and
// defaults, parsing YAML with ${VAR} expansion, and validation.
//
// The flow follows litestream: Default (or DefaultEnv) gives a Config with
// every default filled in, Parse decodes a YAML document over it, rejecting
// unknown keys with the file, line and key, and Validate reports every problem
// at once, each naming its key. Load does all of it for a file on disk and
// resolves the relative paths in it against the file's directory.
//
// Tokens stay out of the file: a scalar value may name environment variables
// as ${VAR} or ${VAR:-default}; $${ writes a literal ${.
package config

import (
	"path/filepath"
	"time"
)

// Config is the whole configuration. The yaml tags are the file's keys;
// every key is documented in config.example.yaml at the repository root.
type Config struct {
	// StateDir holds the orchestrator's durable state (runs, questions,
	// answers). Default: $XDG_STATE_HOME/orchestrator, else
	// ~/.local/state/orchestrator.
	StateDir string `yaml:"state_dir"`
	// DatabaseURL is where the store is: empty for the embedded SQLite
	// database in StateDir, postgres://… for a PostgreSQL database several
	// instances may share. Default: $ORCHESTRATOR_DATABASE_URL. It may hold
	// a password: it is never shown.
	DatabaseURL string   `yaml:"database_url"`
	Log         Log      `yaml:"log"`
	Agent       Agent    `yaml:"agent"`
	Run         Run      `yaml:"run"`
	Surfaces    Surfaces `yaml:"surfaces"`
	Specs       Specs    `yaml:"specs"`
	Serve       Serve    `yaml:"serve"`
	Git         Git      `yaml:"git"` // git.go
	// Approvals is the policy for the model's tool calls (approvals.go).
	Approvals Approvals `yaml:"approvals"`
	// Retention is how long gc keeps transcripts, finished runs and their
	// local branches (retention.go).
	Retention Retention `yaml:"retention"`
	// Rules bounds remembered decisions (rules.go).
	Rules Rules `yaml:"rules"`
	// Triggers start runs from events elsewhere: GitHub issues
	// (triggers.go).
	Triggers Triggers `yaml:"triggers"`
	// Notify says which events are told where: surfaces, webhooks
	// (notify.go).
	Notify Notify `yaml:"notify"`
	// Limits caps what all runs together spend a day and a month
	// (limits.go).
	Limits Limits `yaml:"limits"`

	// source is the file the config came from ("" for defaults) and lines
	// maps a dotted key to the line it was set on, so that Validate can
	// name both.
	source string
	lines  map[string]int
}

// Log configures the orchestrator's own log (stderr).
type Log struct {
	// Level is debug, info, warn or error. Default: info.
	Level string `yaml:"level"`
	// Format is text or json. Default: text.
	Format string `yaml:"format"`
}

// Agent configures the coding agent CLI the orchestrator drives.
type Agent struct {
	// Command is the agent CLI: a name looked up on PATH or a path.
	// Default: "claude".
	Command string `yaml:"command"`
	// Harness says which CLI dialect Command speaks: claude (Claude Code's
	// stream-json) or claw (claw's JSON envelope). Default: claude.
	Harness string `yaml:"harness"`
	// Model is passed as --model when set.
	Model string `yaml:"model"`
	// AllowedTools are passed verbatim as --allowedTools, e.g. "Bash(go test:*)".
	AllowedTools []string `yaml:"allowed_tools"`
	// DisallowedTools are passed verbatim as --disallowedTools.
	DisallowedTools []string `yaml:"disallowed_tools"`
	// PermissionMode is passed as --permission-mode unless it is "default".
	PermissionMode string `yaml:"permission_mode"`
	// MCPConfig is a JSON file of MCP servers ({"mcpServers": {...}}).
	MCPConfig string `yaml:"mcp_config"`
	// MCPServers are inline MCP servers, name → server (type, command,
	// args, env, url, headers, ...), written to a 0600 temporary file as
	// {"mcpServers": ...} for each run.
	MCPServers map[string]any `yaml:"mcp_servers"`
	// StrictMCPConfig passes --strict-mcp-config: only the servers above.
	StrictMCPConfig bool `yaml:"strict_mcp_config"`
	// MaxTurns is passed as --max-turns when above zero.
	MaxTurns int `yaml:"max_turns"`
	// MaxCostUSD is what one run may spend, in US dollars, before it asks
	// its surfaces whether to go on (passed as --max-budget-usd for what
	// is left); 0 means no limit.
	MaxCostUSD float64 `yaml:"max_cost_usd"`
	// Timeout bounds one whole agent turn (one CLI process); 0 means none.
	Timeout Duration `yaml:"timeout"`
	// IdleTimeout ends a turn whose CLI printed nothing for this long;
	// 0 means none.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// AppendSystemPrompt is extra text appended after the built-in question
	// protocol (--append-system-prompt), sent on every call.
	AppendSystemPrompt string `yaml:"append_system_prompt"`
	// DangerouslySkipPermissions passes --dangerously-skip-permissions. It
	// is also the opt-in that permission_mode bypassPermissions (in the
	// config or a spec) needs, since that mode skips every check too.
	DangerouslySkipPermissions bool `yaml:"dangerously_skip_permissions"`
	// Env are extra environment variables for the CLI.
	Env map[string]string `yaml:"env"`
	// PassEnv names inherited variables that look like secrets (…_TOKEN,
	// …_KEY, …_SECRET…, …_PASSWORD…, AWS credentials) and are passed to the
	// CLI all the same; a trailing "*" makes a prefix. Others are not.
	PassEnv []string `yaml:"pass_env"`
	// MaxLineBytes caps one line of the CLI's output. Default: 64 MiB.
	MaxLineBytes ByteSize `yaml:"max_line_bytes"`
	// Workdir is the directory the CLI runs in; "" means the current one.
	Workdir string `yaml:"workdir"`
}

// Run configures the loop run → detect questions → ask → resume.
type Run struct {
	// MaxQuestionRounds bounds how many times one run may stop to ask.
	// Default: 20.
	MaxQuestionRounds int `yaml:"max_question_rounds"`
	// MaxCorrections bounds how many times the model is asked to fix a
	// malformed question marker in a row. Default: 2.
	MaxCorrections int `yaml:"max_corrections"`
	// RateLimitRetries is how many times a rate-limited turn is retried.
	// Default: 3.
	RateLimitRetries int `yaml:"rate_limit_retries"`
	// RateLimitBackoff is the first wait before a retry, doubled each try.
	// Default: 30s.
	RateLimitBackoff Duration `yaml:"rate_limit_backoff"`
	// AnswerMaxBytes caps the size of one answer. Default: 8192.
	AnswerMaxBytes ByteSize `yaml:"answer_max_bytes"`
}

// Surfaces configures where questions are asked: one field per surface,
// its yaml key the surface's name and its type a SurfaceConfig. A new
// surface is a field here, its block type (with Check), a package under
// surfaces/ and a row of cmd/orchestrator's surfaceKinds.
type Surfaces struct {
	Terminal Terminal `yaml:"terminal"`
	GitHub   GitHub   `yaml:"github"`
	Discord  Discord  `yaml:"discord"`
	Slack    Slack    `yaml:"slack"`
}

// Terminal asks on the orchestrator's own terminal.
type Terminal struct {
	// Enabled asks on the terminal when stdin is one. Default: true.
	Enabled bool `yaml:"enabled"`
}

// GitHub asks in issue comments.
type GitHub struct {
	// Enabled turns the surface on. Default: false.
	Enabled bool `yaml:"enabled"`
	// BaseURL is the REST API root. Default: https://api.github.com/.
	BaseURL string `yaml:"base_url"`
	// Token authenticates as a user or bot; exactly one of Token and App.
	Token string    `yaml:"token"`
	App   GitHubApp `yaml:"app"`
	// Repo is "owner/name".
	Repo string `yaml:"repo" spec:"override"`
	// Issue is the issue to ask in; 0 opens one issue per run.
	Issue int `yaml:"issue" spec:"override"`
	// Labels are put on the issues the orchestrator opens.
	Labels []string `yaml:"labels" spec:"override"`
	// PollInterval is how often comments are polled. Default: 15s; at
	// least MinPollInterval (MinLocalPollInterval for a base_url on this
	// machine, such as a test server).
	PollInterval Duration `yaml:"poll_interval"`
	// RequestTimeout bounds each request to GitHub (one that gets no
	// answer in time fails, and the surface reports itself unhealthy on
	// /healthz until GitHub answers). Default: 30s.
	RequestTimeout Duration `yaml:"request_timeout"`
	// Allow lists logins that may answer.
	Allow []string `yaml:"allow"`
	// AllowOnly, when true, accepts answers only from Allow; when false,
	// also from anyone with write access to Repo.
	AllowOnly bool `yaml:"allow_only"`
	// WebhookSecret verifies webhook deliveries (serve); empty turns
	// webhooks off and polling alone is used.
	WebhookSecret string `yaml:"webhook_secret"`
	// Progress keeps one status comment per run on its issue (current
	// step, tool uses, cost; edited at most every 10s; a summary at the
	// end). Default: false.
	Progress bool `yaml:"progress"`
	// CloseIssue closes a run's own issue (issue 0) when the run ends,
	// with a final comment saying how it ended. Default: true.
	CloseIssue bool `yaml:"close_issue"`
}

// GitHubApp authenticates as a GitHub App installation.
type GitHubApp struct {
	ID             int64  `yaml:"id"`
	InstallationID int64  `yaml:"installation_id"`
	PrivateKeyFile string `yaml:"private_key_file"`
}

// Configured reports whether any of the app's keys is set.
func (a GitHubApp) Configured() bool {
	return a.ID != 0 || a.InstallationID != 0 || a.PrivateKeyFile != ""
}

// Discord asks in a Discord channel.
type Discord struct {
	// Enabled turns the surface on. Default: false.
	Enabled bool `yaml:"enabled"`
	// Token is the bot token.
	Token string `yaml:"token"`
	// ChannelID is where questions are posted.
	ChannelID string `yaml:"channel_id" spec:"override"`
	// ThreadPerRun opens a thread for each run. Default: true.
	ThreadPerRun bool `yaml:"thread_per_run" spec:"override"`
	// AllowUsers and AllowRoles are the user and role IDs that may answer;
	// at least one of them must be set.
	AllowUsers []string `yaml:"allow_users"`
	AllowRoles []string `yaml:"allow_roles"`
	// AcceptReplies takes typed replies to a question message as free-text
	// answers, besides the buttons; it needs the privileged Message Content
	// intent. Default: false.
	AcceptReplies bool `yaml:"accept_replies"`
	// APIURL and GatewayURL override Discord's endpoints (tests, proxies).
	APIURL     string `yaml:"api_url"`
	GatewayURL string `yaml:"gateway_url"`
	// RequestTimeout bounds each request to Discord's API. Default: 20s.
	RequestTimeout Duration `yaml:"request_timeout"`
}

// Slack asks in a Slack channel, through Socket Mode.
type Slack struct {
	// Enabled turns the surface on. Default: false.
	Enabled bool `yaml:"enabled"`
	// BotToken (xoxb-…) calls the Web API.
	BotToken string `yaml:"bot_token"`
	// AppToken (xapp-…, scope connections:write) opens Socket Mode
	// connections: no public URL is needed.
	AppToken string `yaml:"app_token"`
	// SigningSecret verifies interactivity requests Slack sends over HTTP
	// to serve (POST /webhooks/slack), instead of Socket Mode.
	SigningSecret string `yaml:"signing_secret"`
	// Channel is the channel ID (C…) questions are posted in.
	Channel string `yaml:"channel" spec:"override"`
	// ThreadPerRun posts a run's questions and end in a thread of its own.
	// Default: true.
	ThreadPerRun bool `yaml:"thread_per_run" spec:"override"`
	// AllowUsers (U…) and the members of AllowGroups (user groups, S…)
	// may answer; at least one of them must be set.
	AllowUsers  []string `yaml:"allow_users"`
	AllowGroups []string `yaml:"allow_groups"`
	// APIURL is Slack's Web API root (tests, proxies). Default: empty
	// (https://slack.com/api/).
	APIURL string `yaml:"api_url"`
	// RequestTimeout bounds each request to Slack's Web API. Default: 20s.
	RequestTimeout Duration `yaml:"request_timeout"`
}

// Specs configures the spec files.
type Specs struct {
	// Dir holds the spec files. Default: ./specs.
	Dir string `yaml:"dir"`
}

// Serve configures the long-running daemon.
type Serve struct {
	// Listen is the HTTP address (webhooks, health, metrics).
	// Default: 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// MaxConcurrentRuns bounds scheduled runs at once and the agent CLIs
	// serve runs at once, whatever started them. Default: 2.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// LeaseTTL is how long a run's lease outlives the instance driving it
	// when the store is shared (database_url postgres://…): the instance
	// renews it every quarter of it while it works, and stops the run's
	// CLI when it could not renew it for half of it (so does the CLI's
	// guard, should the instance stall), so a dead instance's run is taken
	// over by another after this time, never while its CLI runs. At least MinLeaseTTL, so
	// a slow renewal (a busy database, a GC pause) does not lose a live
	// run. Unused on SQLite. Default: 30s.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// CatchUp says what to do with schedules missed while down: skip them,
	// or run each missed spec once. Default: skip.
	CatchUp string `yaml:"catch_up"`
	// MinScheduleInterval is the shortest time between two firings of a
	// spec's schedule that validate and serve accept: every firing is a
	// paid run. 0 means the default, 1m; lower it (e.g. to 1s) only on
	// purpose, as tests do.
	MinScheduleInterval Duration `yaml:"min_schedule_interval"`
	// PauseAfterFailures pauses a scheduled spec's schedule once that many
	// of its runs failed in a row (a spec's pause_after_failures wins);
	// 0 never pauses. Default: 3.
	PauseAfterFailures int `yaml:"pause_after_failures"`
	// Web is the web inbox (internal/config/web.go).
	Web Web `yaml:"web"`
}

// Default values that are not zero.
const (
	DefaultCommand           = "claude"
	DefaultHarness           = "claude"
	DefaultPermissionMode    = "default"
	DefaultMaxLineBytes      = 64 << 20
	DefaultTimeout           = Duration(time.Hour)
	DefaultIdleTimeout       = Duration(10 * time.Minute)
	DefaultMaxQuestionRounds = 20
	DefaultMaxCorrections    = 2
	DefaultRateLimitRetries  = 3
	DefaultRateLimitBackoff  = Duration(30 * time.Second)
	DefaultAnswerMaxBytes    = 8192
	DefaultGitHubBaseURL     = "https://api.github.com/"
	DefaultPollInterval      = Duration(15 * time.Second)
	DefaultSpecsDir          = "specs"
	DefaultListen            = "127.0.0.1:8080"
	DefaultMaxConcurrentRuns = 2
	DefaultCatchUp           = "skip"
	// DefaultLeaseTTL is serve.lease_ttl's default.
	DefaultLeaseTTL = Duration(30 * time.Second)
	// MinLeaseTTL is the floor of serve.lease_ttl: the lease is renewed
	// every third of it, and a renewal is a database round trip that must
	// fit in that third with room to spare.
	MinLeaseTTL = Duration(3 * time.Second)
	// DefaultMinScheduleInterval is serve.min_schedule_interval's default.
	DefaultMinScheduleInterval = Duration(time.Minute)
	// MinPollInterval is the floor of surfaces.github.poll_interval: GitHub
	// asks clients not to poll faster.
	MinPollInterval = Duration(time.Second)
	// MinLocalPollInterval is the floor for a base_url on a loopback
	// address (a test server or a local proxy).
	MinLocalPollInterval = Duration(10 * time.Millisecond)
)

// ScheduleFloor returns serve.min_schedule_interval, or its default when 0.
func (s Serve) ScheduleFloor() time.Duration {
	if s.MinScheduleInterval <= 0 {
		return DefaultMinScheduleInterval.Std()
	}
	return s.MinScheduleInterval.Std()
}

// LookupFunc looks up an environment variable, like os.LookupEnv.
type LookupFunc func(key string) (string, bool)

// DefaultEnv returns the defaults, with the state directory taken from
// lookup ($XDG_STATE_HOME, else $HOME). When neither is set StateDir is
// empty and Validate says so.
func DefaultEnv(lookup LookupFunc) Config {
	return Config{
		StateDir:    defaultStateDir(lookup),
		DatabaseURL: defaultDatabaseURL(lookup),
		Git:         Git{KeepWorktrees: DefaultKeepWorktrees, MaxFileSize: DefaultMaxFileSize},
		Approvals:   Approvals{Hold: DefaultApprovalHold},
		Retention:   Retention{Transcripts: DefaultRetainTranscripts, Runs: DefaultRetainRuns, Branches: DefaultRetainBranches},
		Rules:       Rules{MaxLifetime: DefaultRuleMaxLifetime, SuggestAfter: DefaultRuleSuggestAfter},
		Triggers:    defaultTriggers(),
		Limits:      Limits{Timezone: "UTC"},
		Log:         Log{Level: "info", Format: "text"},
		Notify:      Notify{NotifyRoute: NotifyRoute{WaitingAfter: DefaultWaitingAfter}},
		Agent: Agent{
			Command:        DefaultCommand,
			Harness:        DefaultHarness,
			PermissionMode: DefaultPermissionMode,
			Timeout:        DefaultTimeout,
			IdleTimeout:    DefaultIdleTimeout,
			MaxLineBytes:   DefaultMaxLineBytes,
		},
		Run: Run{
			MaxQuestionRounds: DefaultMaxQuestionRounds,
			MaxCorrections:    DefaultMaxCorrections,
			RateLimitRetries:  DefaultRateLimitRetries,
			RateLimitBackoff:  DefaultRateLimitBackoff,
			AnswerMaxBytes:    DefaultAnswerMaxBytes,
		},
		Surfaces: Surfaces{
			Terminal: Terminal{Enabled: true},
			GitHub: GitHub{
				BaseURL:        DefaultGitHubBaseURL,
				PollInterval:   DefaultPollInterval,
				RequestTimeout: DefaultGitHubRequestTimeout,
				CloseIssue:     true,
			},
			Discord: Discord{ThreadPerRun: true, RequestTimeout: DefaultDiscordRequestTimeout},
			Slack:   Slack{ThreadPerRun: true, RequestTimeout: DefaultDiscordRequestTimeout},
		},
		Specs: Specs{Dir: DefaultSpecsDir},
		Serve: Serve{
			Listen:            DefaultListen,
			MaxConcurrentRuns: DefaultMaxConcurrentRuns,
			CatchUp:           DefaultCatchUp,
			LeaseTTL:          DefaultLeaseTTL,

			MinScheduleInterval: DefaultMinScheduleInterval,
			PauseAfterFailures:  DefaultPauseAfterFailures,
			Web:                 Web{ProxyHeader: DefaultProxyHeader, ProxySecretHeader: DefaultProxySecretHeader, ProxyRole: "answer"},
		},
	}
}

// EnvDatabaseURL is the environment variable database_url defaults to.
const EnvDatabaseURL = "ORCHESTRATOR_DATABASE_URL"

func defaultDatabaseURL(lookup LookupFunc) string {
	u, _ := lookup(EnvDatabaseURL)
	return u
}

// DefaultStateDir is the state_dir used when none is set, from lookup's
// $XDG_STATE_HOME or $HOME ("" when neither is set).
func DefaultStateDir(lookup LookupFunc) string { return defaultStateDir(lookup) }

func defaultStateDir(lookup LookupFunc) string {
	if dir, ok := lookup("XDG_STATE_HOME"); ok && filepath.IsAbs(dir) {
		return filepath.Join(dir, "orchestrator")
	}
	if home, ok := lookup("HOME"); ok && home != "" {
		return filepath.Join(home, ".local", "state", "orchestrator")
	}
	return ""
}

// Source returns the file the config was read from, "" for defaults.
func (c *Config) Source() string { return c.source }

// Line returns the line the dotted key (e.g. "surfaces.github.repo") was
// set on, 0 when it was not set in the file.
func (c *Config) Line(key string) int { return c.lines[key] }
