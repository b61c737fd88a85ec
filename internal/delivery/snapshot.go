package delivery

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxSnapshotFile is the largest file a snapshot keeps the content of;
// a larger one is kept as its digest (a change is reported, not restored).
const maxSnapshotFile = 1 << 20

// snapshot is the checkout's git configuration and hooks at a point in
// time.
type snapshot struct {
	// Files are the files watched, by absolute path; a file that did not
	// exist is recorded as absent (its creation is a change).
	Files map[string]snapFile `json:"files"`
	// Dirs are directories whose every file is in Files (hooks): a file
	// that appears in one is a change.
	Dirs []string `json:"dirs"`
}

type snapFile struct {
	Absent  bool   `json:"absent,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	Link    string `json:"link,omitempty"`    // a symbolic link's target
	Content []byte `json:"content,omitempty"` // up to maxSnapshotFile
	Sum     []byte `json:"sum,omitempty"`     // sha256 of the content
}

func readSnapFile(path string) snapFile {
	fi, err := os.Lstat(path)
	if err != nil {
		return snapFile{Absent: true}
	}
	f := snapFile{Mode: uint32(fi.Mode())}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		f.Link, _ = os.Readlink(path)
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(path)
		if err != nil {
			return f
		}
		sum := sha256.Sum256(b)
		f.Sum = sum[:]
		if len(b) <= maxSnapshotFile {
			f.Content = b
		}
	}
	return f
}

func (f snapFile) same(o snapFile) bool {
	return f.Absent == o.Absent && f.Mode == o.Mode && f.Link == o.Link && bytes.Equal(f.Sum, o.Sum)
}

// takeSnapshot records the configuration files git reads for the checkout
// top (the common config, what it includes, the worktree configurations)
// and the hook directories (the common hooks, core.hooksPath's).
func (d *Deliverer) takeSnapshot(ctx context.Context, top, commonDir, gitDir string) snapshot {
	g := d.cfg.Git
	s := snapshot{Files: map[string]snapFile{}}
	paths := []string{filepath.Join(commonDir, "config"), filepath.Join(commonDir, "config.worktree"), filepath.Join(gitDir, "config.worktree")}
	env := []string{"GIT_DIR=" + commonDir}
	if out, err := g.run(ctx, top, env, "", "config", "--local", "--includes", "--list", "--show-origin", "-z"); err == nil {
		for _, rec := range strings.Split(out, "\x00") {
			if p, ok := strings.CutPrefix(rec, "file:"); ok {
				if !filepath.IsAbs(p) {
					p = filepath.Join(top, p)
				}
				paths = append(paths, filepath.Clean(p))
			}
		}
	}
	// Files an include names are watched even when they do not exist (yet).
	if out, err := g.run(ctx, top, env, "", "config", "--local", "--includes", "--get-regexp", `^include(if\..*)?\.path$`); err == nil {
		for _, l := range strings.Split(out, "\n") {
			_, p, ok := strings.Cut(l, " ")
			switch {
			case !ok || p == "":
				continue
			case strings.HasPrefix(p, "~/"):
				p = filepath.Join(cmp.Or(g.Home, os.DevNull), p[2:])
			case !filepath.IsAbs(p):
				p = filepath.Join(commonDir, p)
			}
			paths = append(paths, filepath.Clean(p))
		}
	}
	for _, p := range paths {
		s.Files[p] = readSnapFile(p)
	}
	dirs := []string{filepath.Join(commonDir, "hooks")}
	if hp, err := g.run(ctx, top, env, "", "config", "--local", "--includes", "--path", "--get", "core.hooksPath"); err == nil && hp != "" {
		if !filepath.IsAbs(hp) {
			hp = filepath.Join(top, hp)
		}
		dirs = append(dirs, filepath.Clean(hp))
	}
	for _, dir := range dirs {
		if _, seen := s.Files[dir]; seen || slicesContains(s.Dirs, dir) {
			continue
		}
		s.Dirs = append(s.Dirs, dir)
		for _, p := range filesUnder(dir) {
			s.Files[p] = readSnapFile(p)
		}
	}
	return s
}

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// filesUnder lists the files (and links) under dir, sorted.
func filesUnder(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// restore puts back every file of s that changed, removes the files that
// appeared in its directories, keeps what it replaced or removed under
// keep, and says what it did, one line a file (none: nothing changed).
func (s snapshot) restore(keep string) []string {
	var out []string
	kept := 0
	save := func(p string) string {
		kept++
		dst := filepath.Join(keep, fmt.Sprintf("%02d-%s", kept, strings.NewReplacer("/", "_", "\\", "_").Replace(strings.TrimLeft(p, "/"))))
		if os.MkdirAll(keep, 0o700) != nil {
			return ""
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && os.WriteFile(dst, b, 0o600) == nil {
				return dst
			}
		}
		return ""
	}
	paths := make([]string, 0, len(s.Files))
	for p := range s.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		want := s.Files[p]
		cur := readSnapFile(p)
		if cur.same(want) {
			continue
		}
		what := "changed"
		switch {
		case want.Absent:
			what = "added"
		case cur.Absent:
			what = "removed"
		}
		where := ""
		if !cur.Absent {
			if k := save(p); k != "" {
				where = "; what the run left is kept in " + k
			}
		}
		if err := put(p, want); err != nil {
			out = append(out, fmt.Sprintf("%s was %s during the run and could not be restored: %v%s", p, what, err, where))
			continue
		}
		out = append(out, fmt.Sprintf("%s was %s during the run: restored%s", p, what, where))
	}
	for _, dir := range s.Dirs {
		for _, p := range filesUnder(dir) {
			if _, ok := s.Files[p]; ok {
				continue
			}
			where := ""
			if k := save(p); k != "" {
				where = "; kept in " + k
			}
			if err := os.Remove(p); err != nil {
				out = append(out, fmt.Sprintf("%s was added during the run and could not be removed: %v", p, err))
				continue
			}
			out = append(out, fmt.Sprintf("%s was added during the run: removed%s", p, where))
		}
	}
	return out
}

// put makes path what f says it was.
func put(path string, f snapFile) error {
	if f.Absent {
		if err := os.RemoveAll(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	mode := fs.FileMode(f.Mode)
	if mode&fs.ModeSymlink != 0 {
		os.Remove(path)
		return os.Symlink(f.Link, path)
	}
	if !mode.IsRegular() {
		return fmt.Errorf("not a regular file when recorded")
	}
	if f.Content == nil && len(f.Sum) > 0 && !bytes.Equal(f.Sum, sha256Empty[:]) {
		return fmt.Errorf("larger than %d bytes: its content was not recorded", maxSnapshotFile)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".orchestrator-restore"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, f.Content, mode.Perm()); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode.Perm()); err != nil {
		return err
	}
	os.RemoveAll(path) // a directory put in its place
	return os.Rename(tmp, path)
}

var sha256Empty = sha256.Sum256(nil)
