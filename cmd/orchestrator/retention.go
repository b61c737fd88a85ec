package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/delivery"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// gcReport is what one gc removed (or, dry, would remove).
type gcReport struct {
	Worktrees   []delivery.Removed
	Branches    []delivery.PrunedBranch
	Transcripts []gcFile
	Runs        []store.ExpiredRun
	Rows        int64
	Bytes       int64 // the size of the files and worktrees removed
}

type gcFile struct {
	Path  string
	Bytes int64
}

// gcParts says which parts of gc to do: this machine's files (worktrees,
// local branches, transcripts), the store's rows, or both. here removes
// only the worktrees found on this machine (several instances share the
// store: a worktree not here may be another machine's).
type gcParts struct {
	files, rows, here bool
}

var gcAll = gcParts{files: true, rows: true}

// collect is one gc: worktrees past age, then the local branches, the
// transcripts and the runs' rows past the retention (in that order: the
// branches are found by the runs' delivery rows, the transcripts of a
// live run by its status).
func (m *Main) collect(ctx context.Context, st *store.Store, age time.Duration, dry bool, parts gcParts) (gcReport, error) {
	var rep gcReport
	var errs []error
	now := time.Now()
	ret := m.Config.Retention
	// A Deliverer of gc's own: it only runs git and reads the store, and
	// serve's (m.deliverer) is built by its first caller with the surfaces.
	d, err := delivery.New(delivery.Config{Store: st, Logger: m.Logger.With("part", "gc"), AwayBase: config.DefaultStateDir(m.LookupEnv)})
	if err != nil {
		return rep, err
	}

	if parts.files {
		errs = append(errs, m.collectFiles(ctx, st, d, &rep, age, dry, parts.here))
	}

	// The runs' rows.
	if parts.rows && ret.Runs > 0 {
		before := now.Add(-ret.Runs.Std())
		if dry {
			rep.Runs, err = st.ExpiredRuns(ctx, before)
			errs = append(errs, err)
		} else {
			var p store.Purged
			p, err = st.PurgeRuns(ctx, before, 0)
			errs = append(errs, err)
			rep.Rows = p.Rows
			for _, id := range p.Runs {
				rep.Runs = append(rep.Runs, store.ExpiredRun{ID: id})
			}
			_, err = st.PurgeNotifications(ctx, before) // notify.go's outbox
			errs = append(errs, err)
			_, err = st.PurgeRefs(ctx, before) // the surfaces' refs of no run
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// collectFiles is gc's part on this machine: worktrees, local branches,
// transcripts.
func (m *Main) collectFiles(ctx context.Context, st *store.Store, d *delivery.Deliverer, rep *gcReport, age time.Duration, dry, here bool) error {
	var errs []error
	now := time.Now()
	ret := m.Config.Retention
	// Worktrees.
	kept, err := st.KeptWorktrees(ctx)
	if err != nil {
		return err
	}
	sizes := map[string]int64{}
	cutoff := now.Add(-age)
	for _, k := range kept {
		if k.Run.Status.Final() && !k.Run.UpdatedAt.After(cutoff) && !k.Delivery.Pending {
			sizes[k.Delivery.Worktree] = dirSize(k.Delivery.Worktree)
			if dry {
				rep.Worktrees = append(rep.Worktrees, delivery.Removed{RunID: k.Run.ID, Worktree: k.Delivery.Worktree, Status: k.Run.Status})
			}
		}
	}
	if !dry && here {
		rep.Worktrees, err = d.GCHere(ctx, age)
		errs = append(errs, err)
	} else if !dry {
		rep.Worktrees, err = d.GC(ctx, age)
		errs = append(errs, err)
	}
	for _, w := range rep.Worktrees {
		rep.Bytes += sizes[w.Worktree]
	}

	// Local branches: also those of runs whose rows go now.
	if ret.Branches > 0 {
		before := now.Add(-ret.Branches.Std())
		if ret.Runs > 0 && ret.Runs < ret.Branches {
			before = now.Add(-ret.Runs.Std())
		}
		rep.Branches, err = d.PruneBranches(ctx, before, dry)
		errs = append(errs, err)
	}

	// Transcripts.
	if ret.Transcripts > 0 {
		rep.Transcripts, err = pruneTranscripts(ctx, st, filepath.Join(st.Dir(), "transcripts"), now.Add(-ret.Transcripts.Std()), dry)
		errs = append(errs, err)
		for _, f := range rep.Transcripts {
			rep.Bytes += f.Bytes
		}
	}
	return errors.Join(errs...)
}

// pruneTranscripts removes the transcript files under dir last written
// before before. A run's own directory (dir/<run ID>) is left alone while
// the run is not over; an emptied directory goes too.
func pruneTranscripts(ctx context.Context, st *store.Store, dir string, before time.Time, dry bool) ([]gcFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("transcripts: %w", err)
	}
	var out []gcFile
	var errs []error
	old := func(path string, de fs.DirEntry) {
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(before) {
			return
		}
		if !dry {
			if err := os.Remove(path); err != nil {
				errs = append(errs, fmt.Errorf("transcripts: %w", err))
				return
			}
		}
		out = append(out, gcFile{Path: path, Bytes: fi.Size()})
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			old(path, e)
			continue
		}
		run, err := st.Run(ctx, e.Name())
		if err == nil && !run.Status.Final() {
			continue // a live run's: kept, however old
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		files, err := os.ReadDir(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("transcripts: %w", err))
			continue
		}
		for _, f := range files {
			old(filepath.Join(path, f.Name()), f)
		}
		if !dry {
			os.Remove(path) // only when emptied: a directory with files stays
		}
	}
	return out, errors.Join(errs...)
}

// dirSize is the size of the files under dir (0 when it cannot be read).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// humanBytes writes n with a binary unit: "0 B", "12.3 KiB", "4.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (r gcReport) print(w io.Writer, dry bool) {
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	for _, x := range r.Worktrees {
		fmt.Fprintf(w, "%s %s (run %s, %s)\n", verb, x.Worktree, x.RunID, x.Status)
	}
	for _, b := range r.Branches {
		why := "ended long ago"
		if b.Pushed {
			why = "pushed"
		}
		fmt.Fprintf(w, "%s branch %s in %s (run %s, %s)\n", verb, b.Branch, b.RepoDir, b.RunID, why)
	}
	var tb int64
	for _, f := range r.Transcripts {
		tb += f.Bytes
	}
	if len(r.Transcripts) > 0 {
		fmt.Fprintf(w, "%s %d transcript files (%s)\n", verb, len(r.Transcripts), humanBytes(tb))
	}
	for _, x := range r.Runs {
		if dry {
			fmt.Fprintf(w, "%s run %s (%s, last changed %s)\n", verb, x.ID, x.Status, x.UpdatedAt.Format(time.DateOnly))
		} else {
			fmt.Fprintf(w, "%s run %s\n", verb, x.ID)
		}
	}
	if len(r.Worktrees)+len(r.Branches)+len(r.Transcripts)+len(r.Runs) == 0 {
		fmt.Fprintln(w, "nothing to remove: nothing of an ended run is older than the retention")
		return
	}
	if dry {
		fmt.Fprintf(w, "would free %s on disk (files and worktrees)\n", humanBytes(r.Bytes))
		return
	}
	fmt.Fprintf(w, "freed %s on disk (files and worktrees)", humanBytes(r.Bytes))
	if len(r.Runs) > 0 {
		fmt.Fprintf(w, "; %d runs and %d rows removed from the store (the database reuses their space)", len(r.Runs), r.Rows)
	}
	fmt.Fprintln(w)
}

// statusStateDir is the size of the state directory, as status shows it:
// all of it, and its transcripts and worktrees (what gc removes).
type statusStateDir struct {
	Bytes            int64 `json:"bytes"`
	TranscriptsBytes int64 `json:"transcripts_bytes"`
	WorktreesBytes   int64 `json:"worktrees_bytes"`
}

// stateDirSize measures the state directory dir.
func stateDirSize(dir string) *statusStateDir {
	return &statusStateDir{Bytes: dirSize(dir), TranscriptsBytes: dirSize(filepath.Join(dir, "transcripts")),
		WorktreesBytes: dirSize(filepath.Join(dir, "worktrees"))}
}

func printStateDir(w io.Writer, s *statusStateDir) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\nState directory: %s (transcripts %s, worktrees %s; orchestrator gc removes what is past the retention)\n",
		humanBytes(s.Bytes), humanBytes(s.TranscriptsBytes), humanBytes(s.WorktreesBytes))
}
