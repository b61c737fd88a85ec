package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

type runFlags struct {
	prompt   string
	surfaces []string
	workdir  string
	json     bool
	git      bool
}

func (m *Main) newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run (SPEC.md | SPEC-NAME | --prompt TEXT)",
		Short: "Run a spec or a prompt in the foreground, asking questions where configured",
		Long: `run gives the agent a task (a spec file, the name of a spec in specs.dir, or
--prompt), shows its progress, asks its questions on the run's surfaces
(--surface, else the spec's, else the configuration's enabled ones) and
resumes the session with each answer until the model is done.

If no surface of this process can take an answer (the terminal's input ended),
run exits 3 and the question stays pending: answer it with
'orchestrator answer QID TEXT'; a running 'orchestrator serve' on the same
state then drives the run on, else continue with 'orchestrator resume RUN'.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := ""
			if len(args) == 1 {
				spec = args[0]
			}
			return m.runRun(cmd.Context(), spec, f)
		},
	}
	taskFlags(cmd, &f)
	cmd.Flags().BoolVar(&f.json, "json", false, "print progress as NDJSON events on stdout, see docs/json.md (questions go to stderr)")
	return cmd
}

// taskFlags are the flags that say what a new run is (run, submit).
func taskFlags(cmd *cobra.Command, f *runFlags) {
	cmd.Flags().StringVar(&f.prompt, "prompt", "", "the task, instead of a spec file")
	cmd.Flags().StringSliceVar(&f.surfaces, "surface", nil, "where to ask questions: "+surfaceNames("or")+" (repeatable)")
	cmd.Flags().StringVar(&f.workdir, "workdir", "", "the agent's working directory (default: the spec's, else agent.workdir, else here)")
	cmd.Flags().BoolVar(&f.git, "git", false, "deliver the run's work through git: its own worktree and branch, a commit, a push and a pull request as configured (git:)")
}

// newRunFrom builds the NewRun of a spec file or a prompt.
func (m *Main) newRunFrom(specPath string, f runFlags) (runner.NewRun, error) {
	var n runner.NewRun
	var opts runOptions
	switch {
	case specPath != "" && f.prompt != "":
		return n, usageError(errors.New("give a spec file or --prompt, not both"))
	case specPath == "" && f.prompt == "":
		return n, usageError(errors.New("give a spec file or --prompt"))
	case specPath != "":
		abs, data, err := m.findSpec(specPath)
		if err != nil {
			return n, err
		}
		sp, err := specs.Parse(abs, data)
		if err != nil {
			return n, configError(err)
		}
		if err := bypassRefusal(m.Config, sp); err != nil {
			return n, configError(err)
		}
		n, opts = specRun(sp, data)
	default:
		n.Prompt = f.prompt
	}
	return m.finishRun(n, opts, f)
}

// finishRun applies the flags and the configuration's defaults to a run.
func (m *Main) finishRun(n runner.NewRun, opts runOptions, f runFlags) (runner.NewRun, error) {
	opts.Git = f.git
	if f.workdir != "" {
		n.WorkDir = m.path(f.workdir)
	}
	if n.WorkDir == "" {
		n.WorkDir = m.Config.Agent.Workdir
	}
	if n.WorkDir == "" {
		wd := m.Dir
		if wd == "" {
			var err error
			if wd, err = os.Getwd(); err != nil {
				return n, err
			}
		}
		n.WorkDir = wd
	}
	if len(f.surfaces) > 0 {
		n.Surfaces = f.surfaces
	}
	if len(n.Surfaces) == 0 {
		n.Surfaces = m.defaultSurfaces()
	}
	for _, s := range n.Surfaces {
		if _, ok := surfaceKindOf(s); !ok {
			return n, usageError(fmt.Errorf("unknown surface %q (want %s)", s, surfaceNames("or")))
		}
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return n, err
	}
	n.Options = b
	return n, nil
}

// specRun is the NewRun of a parsed spec and the file's text.
func specRun(sp specs.Spec, data []byte) (runner.NewRun, runOptions) {
	var n runner.NewRun
	opts := runOptions{SpecPath: sp.Path, SpecText: string(data)}
	n.Spec, n.Title, n.Prompt, n.WorkDir = sp.Name, sp.Name, sp.Body, sp.WorkDir
	for _, s := range sp.Surfaces {
		n.Surfaces = append(n.Surfaces, s.Name)
	}
	return n, opts
}

// newRunFromSpec builds the NewRun of a spec parsed from data (serve's
// specs folder): the spec's settings, then the configuration's defaults.
func (m *Main) newRunFromSpec(sp specs.Spec, data []byte) (runner.NewRun, error) {
	if data == nil {
		b, err := os.ReadFile(sp.Path)
		if err != nil {
			return runner.NewRun{}, fmt.Errorf("read spec: %w", err)
		}
		data = b
	}
	n, opts := specRun(sp, data)
	return m.finishRun(n, opts, runFlags{})
}

// findSpec reads the spec named on the command line: a file, else the spec
// of that name in specs.dir (a file's name without ".md" unless its
// frontmatter names it). It returns the file's absolute path and content.
func (m *Main) findSpec(arg string) (string, []byte, error) {
	abs, err := filepath.Abs(m.path(arg))
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(abs)
	if err == nil {
		return abs, data, nil
	}
	if !errors.Is(err, fs.ErrNotExist) || strings.ContainsAny(arg, `/\`) || strings.HasSuffix(arg, ".md") {
		return "", nil, configError(fmt.Errorf("read spec: %w", err))
	}
	dir := m.Config.Specs.Dir
	list, lerr := specs.LoadDir(dir) // the good ones: another file's problem does not hide this one
	var known []string
	for _, sp := range list {
		if sp.Name == arg {
			p, err := filepath.Abs(sp.Path)
			if err != nil {
				return "", nil, err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return "", nil, configError(fmt.Errorf("read spec: %w", err))
			}
			return p, data, nil
		}
		known = append(known, sp.Name)
	}
	// A file of the folder named so whose frontmatter does not parse:
	// report its problems, not "no such spec".
	if cand := filepath.Join(dir, arg+".md"); lerr != nil {
		if data, err := os.ReadFile(cand); err == nil {
			if _, perr := specs.Parse(cand, data); perr != nil {
				return "", nil, configError(perr)
			}
		}
	}
	names := "none"
	if len(known) > 0 {
		names = strings.Join(known, ", ")
	}
	if errors.Is(lerr, fs.ErrNotExist) {
		names = "none: the folder does not exist"
	}
	return "", nil, usageError(fmt.Errorf("no spec file %s and no spec named %q in %s (specs.dir); known specs: %s", arg, arg, dir, names))
}

func (m *Main) runRun(ctx context.Context, specPath string, f runFlags) error {
	m.foreground()
	n, err := m.newRunFrom(specPath, f)
	if err != nil {
		return err
	}
	if err := checkWorkDir(n.WorkDir, f.workdir != ""); err != nil {
		return err
	}
	return m.startAndDrive(ctx, n, f.json)
}

// checkWorkDir refuses, before a run is made, a working directory that is
// not a directory here (exit 2): a usage error when --workdir named it,
// else one of the spec or the configuration. (submit does not check: the
// serve that takes the run may be on another machine.)
func checkWorkDir(dir string, fromFlag bool) error {
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return nil
	}
	why := "it is not a directory"
	if errors.Is(err, fs.ErrNotExist) {
		why = "it does not exist"
	} else if err != nil {
		why = err.Error()
	}
	if fromFlag {
		return usageError(fmt.Errorf("--workdir %s: %s", dir, why))
	}
	return configError(fmt.Errorf("workdir %s (the spec's workdir, else agent.workdir): %s", dir, why))
}

// startAndDrive creates a run and drives it in the foreground.
func (m *Main) startAndDrive(ctx context.Context, n runner.NewRun, asJSON bool) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		m.termOut = m.Stderr // stdout carries NDJSON
	}
	p := m.newProgress(asJSON)
	r, fn, err := m.newForegroundRunner(st, p.observe) // notify_foreground.go
	if err != nil {
		return err
	}
	defer fn.flush(ctx, m)
	// The run is driven at once, here: its first turn's claim (BeginTurn,
	// which waits for the disk) comes before the agent starts and makes
	// this commit durable too, so it need not wait for the disk itself
	// (store.Lazy). A power loss before that loses a run nothing was done
	// for yet, along with this process.
	run, err := r.Create(store.Lazy(ctx), n)
	if err != nil {
		return err
	}
	p.started(run)
	fn.forRun(m, run)
	stop := fn.watch(ctx, run.ID)
	defer stop() // before flush
	return m.drive(ctx, r, p, run.ID)
}

// drive drives a run and turns how it ended into the exit status.
func (m *Main) drive(ctx context.Context, r *runner.Runner, p *progress, runID string) error {
	run, err := r.Drive(ctx, runID)
	p.stop()
	p.ended(run, err)
	switch {
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("%w: only one process may drive a run; wait for it or stop it", err)
	case errors.Is(err, runner.ErrWaiting):
		p.waiting(run)
		return waitingError(nil)
	case err != nil && ctx.Err() != nil:
		p.interrupted(run)
		if !p.asJSON {
			return silentExit(exitCancelled) // interrupted said where the run stands
		}
		return ctx.Err()
	case err != nil:
		return err
	}
	switch run.Status {
	case store.RunDone:
		p.done(run)
		return nil
	case store.RunFailed:
		p.failed(run)
		return silentExit(exitFailed)
	case store.RunCancelled:
		return silentExit(exitCancelled)
	case store.RunStopped:
		p.stoppedAtLimit(run)
		return silentExit(exitStopped)
	default:
		return fmt.Errorf("run %s stopped in status %s", run.ID, run.Status)
	}
}
