package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/orchestrator-dev/orchestrator/specs"
)

// specDir follows the specs folder: every rescan reads its "*.md" files
// (README.md aside, as specs.LoadDir), parses those whose bytes changed and
// checks them, and makes the result the scheduler's specs. A file that
// stops validating (or that cannot be read) keeps the version the
// scheduler has, and is reported until it validates again; a file removed
// removes its spec; a folder that does not exist holds no specs.
//
// The folder is read again every Config.RescanEvery rather than watched
// with fsnotify: a rescan of a folder of specs costs a directory listing
// and a byte comparison per file, and it sees what a watch misses or must
// be rebuilt for (the folder created or replaced after start, editors that
// save by rename, network and bind mounts, which send no events).
//
// A specDir is used by one goroutine at a time (New, then the rescan loop).
type specDir struct {
	dir   string
	check func(specs.Spec) error
	log   *slog.Logger

	files   map[string]*specFile // by file name
	missing bool                 // the folder did not exist at the last scan
	dirErr  error                // the folder could not be read at the last scan
	scanned bool
}

// specFile is what the daemon knows of one file of the folder.
type specFile struct {
	path string
	text []byte // as last read
	// latest is text parsed and checked; nil when text does not validate
	// (problem says why).
	latest  *loadedSpec
	problem error
	// applied is the version the scheduler has; nil when none.
	applied *loadedSpec
	// reported is the problem last logged, to log each one once.
	reported string
}

// loadedSpec is a spec with the bytes it was parsed from.
type loadedSpec struct {
	spec specs.Spec
	text []byte
}

// SpecProblem is a spec file that does not validate (or cannot be read) and
// is not run as it is now: the version that validated last, if any, is run
// instead.
type SpecProblem struct {
	File string `json:"file"`
	// Error says what and where (file:line: key: problem), one problem
	// per line.
	Error string `json:"error"`
	// Kept is true when the file's last good version is still scheduled.
	Kept bool `json:"kept"`
}

func newSpecDir(dir string, check func(specs.Spec) error, log *slog.Logger) *specDir {
	return &specDir{dir: dir, check: check, log: log, files: map[string]*specFile{}}
}

// scan reads the folder again and returns the specs to schedule, in file
// name order, and whether they differ from the last scan's.
func (w *specDir) scan() (list []loadedSpec, changed bool) {
	first := !w.scanned
	w.scanned = true
	before := w.list()
	entries, err := os.ReadDir(w.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !w.missing {
			w.missing = true
			if len(w.files) > 0 {
				w.log.Warn("the specs folder is gone: its specs are no longer scheduled", "dir", w.dir)
			} else {
				w.log.Info("no specs folder: serving questions and the runs in the store only; specs put there later are picked up", "dir", w.dir)
			}
		}
		w.dirErr = nil
		entries = nil
	case err != nil:
		if w.dirErr == nil || w.dirErr.Error() != err.Error() {
			w.log.Error("cannot read the specs folder: its specs stay as they were", "dir", w.dir, "err", err)
		}
		w.dirErr = err
		return w.list(), false
	default:
		if w.missing {
			w.log.Info("specs folder found", "dir", w.dir)
		}
		w.missing = false
		if w.dirErr != nil {
			w.log.Info("the specs folder can be read again", "dir", w.dir)
		}
		w.dirErr = nil
	}

	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".md") || strings.EqualFold(name, "README.md") {
			continue
		}
		seen[name] = true
		f := w.files[name]
		if f == nil {
			f = &specFile{path: filepath.Join(w.dir, name)}
			w.files[name] = f
		}
		text, err := os.ReadFile(f.path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(seen, name) // removed since the listing
				continue
			}
			f.latest, f.problem = nil, fmt.Errorf("%s: %w", f.path, err)
			f.text = nil
			continue
		}
		if f.text != nil && string(text) == string(f.text) {
			continue
		}
		f.text = text
		f.latest, f.problem = w.load(f.path, text)
	}
	for name, f := range w.files {
		if !seen[name] {
			if f.applied != nil {
				w.log.Info("spec file removed", "file", f.path, "spec", f.applied.spec.Name)
			}
			delete(w.files, name)
		}
	}

	w.apply()
	list = w.list()
	return list, first || !sameSpecs(before, list)
}

// load parses and checks one file.
func (w *specDir) load(path string, text []byte) (*loadedSpec, error) {
	sp, err := specs.Parse(path, text)
	if err != nil {
		return nil, err
	}
	if w.check != nil {
		if err := w.check(sp); err != nil {
			return nil, err
		}
	}
	return &loadedSpec{spec: sp, text: text}, nil
}

// apply picks each file's version to schedule, in file name order: its
// latest when it validates and its name is not taken by an earlier file,
// else the version applied before (when its name is free), else none.
func (w *specDir) apply() {
	names := make([]string, 0, len(w.files))
	for n := range w.files {
		names = append(names, n)
	}
	sort.Strings(names)
	taken := map[string]string{} // spec name → file
	for _, n := range names {
		f := w.files[n]
		var dup error
		if f.latest != nil {
			if other, ok := taken[f.latest.spec.Name]; ok {
				sp := f.latest.spec
				dup = &specs.Error{File: f.path, Line: sp.Line("name"), Key: "name",
					Err: fmt.Errorf("spec name %q is already used by %s", sp.Name, other)}
			} else {
				f.applied, f.problem = f.latest, nil // a name clash of an earlier scan is gone
				taken[f.latest.spec.Name] = f.path
				continue
			}
		}
		if dup != nil {
			f.problem = dup
		}
		if f.applied != nil {
			if _, ok := taken[f.applied.spec.Name]; ok {
				f.applied = nil
			} else {
				taken[f.applied.spec.Name] = f.path
			}
		}
	}
}

// list is the applied specs in file name order.
func (w *specDir) list() []loadedSpec {
	names := make([]string, 0, len(w.files))
	for n, f := range w.files {
		if f.applied != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]loadedSpec, 0, len(names))
	for _, n := range names {
		out = append(out, *w.files[n].applied)
	}
	return out
}

// current is the file's problem when the file is not run as it is now.
func (f *specFile) current() string {
	if f.problem != nil && (f.latest == nil || f.applied != f.latest) {
		return f.problem.Error()
	}
	return ""
}

// report logs each file's problem once, and when it is gone; called after
// the scan's result is published (scheduler, /healthz), so that whoever
// reads the log finds it there.
func (w *specDir) report() {
	for _, f := range w.files {
		msg := f.current()
		if msg == f.reported {
			continue
		}
		switch {
		case msg == "":
			w.log.Info("spec file valid again", "file", f.path)
		case f.applied != nil:
			w.log.Error("spec file does not validate: its last good version stays scheduled until it is fixed", "file", f.path, "spec", f.applied.spec.Name, "err", msg)
		default:
			w.log.Error("spec file does not validate: it is not scheduled until it is fixed", "file", f.path, "err", msg)
		}
		f.reported = msg
	}
}

// err is every problem of the last scan, together (for a start that refuses
// bad specs, as validate does).
func (w *specDir) err() error {
	var errs []error
	if w.dirErr != nil {
		errs = append(errs, fmt.Errorf("read specs dir %s: %w", w.dir, w.dirErr))
	}
	names := make([]string, 0, len(w.files))
	for n, f := range w.files {
		if f.current() != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		errs = append(errs, w.files[n].problem)
	}
	return errors.Join(errs...)
}

// problems are the files not run as they are now, by file name.
func (w *specDir) problems() []SpecProblem {
	var out []SpecProblem
	if w.dirErr != nil {
		out = append(out, SpecProblem{File: w.dir, Error: w.dirErr.Error(), Kept: true})
	}
	for _, f := range w.files {
		if msg := f.current(); msg != "" {
			out = append(out, SpecProblem{File: f.path, Error: msg, Kept: f.applied != nil})
		}
	}
	slices.SortFunc(out, func(a, b SpecProblem) int { return strings.Compare(a.File, b.File) })
	return out
}

func sameSpecs(a, b []loadedSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i].text) != string(b[i].text) || !reflect.DeepEqual(a[i].spec, b[i].spec) {
			return false
		}
	}
	return true
}

// useSpecs records the texts of the specs to schedule and returns them.
func (d *Daemon) useSpecs(list []loadedSpec) []specs.Spec {
	out := make([]specs.Spec, 0, len(list))
	texts := make(map[string]loadedSpec, len(list))
	for _, l := range list {
		out = append(out, l.spec)
		texts[l.spec.Name] = l
	}
	problems := d.specDir.problems()
	d.mu.Lock()
	d.specTexts = texts
	d.specProblems = problems
	d.mu.Unlock()
	d.cfg.Metrics.setSpecProblems(len(problems))
	return out
}

// rescanLoop reads the specs folder again every RescanEvery and gives the
// scheduler what changed, until ctx ends.
func (d *Daemon) rescanLoop(ctx context.Context) {
	every(ctx, d.cfg.RescanEvery, d.rescan)
}

// rescan reads the specs folder again and applies what changed.
func (d *Daemon) rescan() {
	list, changed := d.specDir.scan()
	sp := d.useSpecs(list)
	if changed {
		if err := d.sched.Set(sp); err != nil {
			// Parse checks schedules: this is a bug, not a bad file.
			d.log.Error("specs folder: the scheduler refused specs", "err", err)
		}
	}
	d.specDir.report()
}
