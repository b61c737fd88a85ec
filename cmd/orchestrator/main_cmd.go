package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/daemon"
	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github"
)

// EnvConfig names the environment variable that gives the configuration
// file when --config does not.
const EnvConfig = "ORCHESTRATOR_CONFIG"

// DefaultConfigFile is read from the working directory when neither
// --config nor ORCHESTRATOR_CONFIG names a file and it exists.
const DefaultConfigFile = "orchestrator.yaml"

// Main is the program: its standard streams, environment and configuration.
// Tests build one with buffers and a map for the environment and call Run
// or Exec in-process; main calls Exec with the process's own.
//
// The fields above the line are set before Run; Config, ConfigFile and
// Logger are set by Run before a command's RunE is called (unless the
// command skips the configuration, see skipConfig).
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// LookupEnv reads the environment: ORCHESTRATOR_CONFIG, the ${VAR}s of
	// the config file, $HOME and $XDG_STATE_HOME for the default state_dir.
	LookupEnv config.LookupFunc
	// Dir is the working directory: ./orchestrator.yaml, a relative
	// --config and the relative default paths (specs.dir) are taken from
	// it. "" means the process's working directory.
	Dir string
	// Version, Commit and Date (of the commit) are printed by
	// `orchestrator version`.
	Version, Commit, Date string

	// Config is the loaded, validated configuration; ConfigFile the file it
	// came from, "" when the defaults were used.
	Config     config.Config
	ConfigFile string
	// Logger writes the orchestrator's own log to Stderr, at the configured
	// level and format. Never nil once Run has started.
	Logger *slog.Logger

	// Flags of the root command.
	configFlag   string
	logLevelFlag string

	// termOut, when set, is where the terminal surface writes instead of
	// Stdout (run --json keeps stdout for NDJSON).
	termOut io.Writer
	// fg is the text progress of a foreground run (progress.go), which
	// the terminal surface shares its output with.
	fg *progress
	// metrics and handlers are set by serve: the surfaces' HTTP clients
	// are instrumented, and their webhook handlers mounted.
	metrics  *daemon.Metrics
	handlers serveHandlers
	// outOnce makes syncOut, Stdout behind a lock (stdout).
	outOnce sync.Once
	syncOut io.Writer
	// consoleOnce makes consoleOut, stdout as a terminal sees it (console).
	consoleOnce sync.Once
	consoleOut  *tty.Out

	// serving is set by serve: runs keep waiting for answers from other
	// processes when no surface of this one can take them.
	serving bool
	// notifier is set by serve (notify.go): emit events through it, e.g.
	// m.notifier.Emit(ctx, notify.Event{Kind: notify.CapReached, ...});
	// nil (not serving) emits nothing.
	notifier *notify.Notifier
	// rehearsing is set by rehearse: the store goes when it ends.
	rehearsing bool
	// surfaceProblems are the problems of the surfaces' configuration a
	// command that works on the store alone (noSurfaces) was loaded
	// despite: such a command builds no surface they concern.
	surfaceProblems []error
	// github is the one GitHub client of the process, built on first use.
	github *github.Client
	// reviews is serve's review intake (review.go), one per repository
	// of triggers.github.repos; none when off.
	reviews []*github.Reviews
	// deliveryState is the Deliverer of the process (delivery.go).
	deliveryState
	// serveReady, when set (tests), is called with serve's bound address.
	serveReady func(addr string)
	// failpoint, when set (the crash tests, failpoint_test.go), is called
	// at each step of the run loop that changes what a crash leaves behind
	// (runner.Config.Failpoint). A built binary has no way to set it.
	failpoint func(point string)
	// hookCommand runs this program for the agent CLI's hook (a shell
	// command prefix); empty: this executable (approvals_wiring.go).
	hookCommand string

	// running is set once a command's RunE is entered: an error before
	// that is a usage error.
	running bool
	closers []func() error
}

// NewMain returns a Main wired to the process: os.Stdin/Stdout/Stderr,
// os.LookupEnv, the build's version.
func NewMain() *Main {
	v, c, d := buildVersion()
	return &Main{
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		LookupEnv: os.LookupEnv,
		Version:   v,
		Commit:    c,
		Date:      d,
	}
}

// Exec runs the command line args (without the program name), prints the
// error if any to Stderr, closes what the command opened, and returns the
// exit code.
func (m *Main) Exec(ctx context.Context, args []string) int {
	err := m.Run(ctx, args)
	if cerr := m.Close(); cerr != nil && err == nil {
		err = cerr
	}
	code := exitCode(ctx, err)
	m.printError(err, code)
	return code
}

// Run runs the command line args (without the program name) and returns
// the command's error; usage errors are marked for exit code 2. It does not
// print the error: Exec does.
func (m *Main) Run(ctx context.Context, args []string) error {
	if m.LookupEnv == nil {
		m.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if m.Stdin == nil {
		m.Stdin = strings.NewReader("")
	}
	if m.Stdout == nil {
		m.Stdout = io.Discard
	}
	if m.Stderr == nil {
		m.Stderr = io.Discard
	}
	if m.Logger == nil {
		m.Logger = newLogger(m.Stderr, config.Log{Level: "info", Format: "text"})
	}
	m.running = false
	root := m.newRootCmd()
	root.SetArgs(args)
	root.SetIn(m.Stdin)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	if err != nil && !m.running && !errors.As(err, &ee) {
		err = usageError(err)
	}
	return err
}

// OnClose registers f to be called by Close, in reverse order of
// registration: a command that opens the store registers its Close.
func (m *Main) OnClose(f func() error) { m.closers = append(m.closers, f) }

// Close calls the functions given to OnClose, last first, and returns their
// errors joined.
func (m *Main) Close() error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}

func (m *Main) printError(err error, code int) {
	if err == nil {
		return
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee) && ee.err == nil:
		// Silent: the command said it already.
	case code == exitCancelled:
		fmt.Fprintln(m.Stderr, "orchestrator: cancelled")
	default:
		// Errors may quote the model's or people's text (a run's error, an
		// answerer's name): printed like any untrusted text.
		fmt.Fprintf(m.Stderr, "orchestrator: %s\n", questions.Printable(err.Error()))
		if errors.As(err, &ee) && ee.usage {
			fmt.Fprintln(m.Stderr, "Run 'orchestrator --help' for usage.")
		}
	}
}

// path makes p relative to m.Dir when it is relative.
func (m *Main) path(p string) string {
	if p == "" || filepath.IsAbs(p) || m.Dir == "" {
		return p
	}
	return filepath.Join(m.Dir, p)
}

// configPath returns the configuration file to read: --config, else
// $ORCHESTRATOR_CONFIG, else ./orchestrator.yaml when it exists, else ""
// (the defaults).
func (m *Main) configPath() (string, error) {
	if m.configFlag != "" {
		return m.path(m.configFlag), nil
	}
	if p, ok := m.LookupEnv(EnvConfig); ok && p != "" {
		return m.path(p), nil
	}
	p := m.path(DefaultConfigFile)
	switch _, err := os.Stat(p); {
	case err == nil:
		return p, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	default:
		return "", fmt.Errorf("find config: %w", err)
	}
}

// readConfig reads the configuration (see configPath) without validating it,
// applying --log-level.
func (m *Main) readConfig() (config.Config, string, error) {
	path, err := m.configPath()
	if err != nil {
		return config.Config{}, "", err
	}
	var cfg config.Config
	if path == "" {
		cfg = config.DefaultEnv(m.LookupEnv)
	} else {
		// On a problem at some key, cfg holds the rest: see loadConfig.
		cfg, err = config.LoadEnv(path, m.LookupEnv)
	}
	if cfg.Line("specs.dir") == 0 {
		cfg.Specs.Dir = m.path(cfg.Specs.Dir)
	}
	if cfg.Line("state_dir") == 0 {
		cfg.StateDir = m.path(cfg.StateDir)
	}
	if m.logLevelFlag != "" {
		cfg.Log.Level = m.logLevelFlag
	}
	return cfg, path, err
}

// loadConfig reads and validates the configuration and sets Config,
// ConfigFile and Logger. Every problem is in the error, one per line.
// Without withSurfaces, problems under surfaces.* are left out: the command
// builds no surface.
func (m *Main) loadConfig(withSurfaces bool) error {
	cfg, path, err := m.readConfig()
	errs := config.Errors(err)
	if err == nil || (!withSurfaces && allConfigErrors(errs)) {
		errs = append(errs, config.Errors(cfg.Validate())...)
	}
	m.surfaceProblems = nil
	if !withSurfaces {
		for _, e := range errs {
			if isSurfaceProblem(e) {
				m.surfaceProblems = append(m.surfaceProblems, e)
			}
		}
		errs = slices.DeleteFunc(errs, isSurfaceProblem)
	}
	if err = errors.Join(errs...); err != nil {
		return configError(problemsError("invalid configuration", err))
	}
	m.Config, m.ConfigFile = cfg, path
	m.Logger = newLogger(m.Stderr, cfg.Log)
	return nil
}

// allConfigErrors reports whether every error is a problem at a key of
// the file, after which the rest of the configuration is usable.
func allConfigErrors(errs []error) bool {
	for _, e := range errs {
		var ce *config.Error
		if !errors.As(e, &ce) || ce.Key == "" {
			return false
		}
	}
	return true
}

// isSurfaceProblem reports whether e is a problem of a key under surfaces.
func isSurfaceProblem(e error) bool {
	var ce *config.Error
	return errors.As(e, &ce) && strings.HasPrefix(ce.Key, "surfaces.")
}

// problemsError formats the problems joined in err under title, one per
// indented line; a single problem stays on one line.
func problemsError(title string, err error) error {
	errs := config.Errors(err)
	if len(errs) == 1 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d problems):", title, len(errs))
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return &joinedError{msg: b.String(), errs: errs}
}

type joinedError struct {
	msg  string
	errs []error
}

func (e *joinedError) Error() string   { return e.msg }
func (e *joinedError) Unwrap() []error { return e.errs }

// newLogger returns the orchestrator's logger on w; cfg is valid (checked
// by Validate), an unknown level means info.
func newLogger(w io.Writer, cfg config.Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
