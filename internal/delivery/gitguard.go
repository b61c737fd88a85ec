package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// The agent runs in the run's worktree with the tools its spec allows, so
// everything it can write is input to the orchestrator's own git commands.
// Three guards keep those commands ours (README: "Delivery and the agent's
// reach"):
//
//   - Every git command runs the guarded way (Git): scrubbed environment,
//     no hooks, no credential helper, protected settings.
//   - What the worktree was when it was added (before the first turn) is
//     recorded (store.GitGuard): the repository's common git directory, the
//     worktree's .git file and git directory, and the remote's URLs. Before
//     committing and pushing, the worktree must still be that (verify);
//     otherwise the run stops and nothing is committed or pushed. The
//     worktree's commands are run with that git directory given explicitly,
//     and fetches and pushes go to the recorded URLs from a bare repository
//     of the run's own (remoteRepo), whose configuration is ours: nothing
//     in the checkout's configuration (url.*.insteadOf, http.*, pushurl,
//     includes) can redirect them or the token.
//   - The checkout's git configuration (with what it includes, and the
//     worktree configuration files) and hooks are snapshotted when the
//     worktree is added; before the commit, the push and the park, what
//     changed since is restored (the changed files are kept beside the
//     worktree, in <run>.rejected/) and reported.

// ErrWorktreeChanged: the run's worktree no longer belongs to the run's
// repository or branch (its .git file, git directory or HEAD changed).
var ErrWorktreeChanged = errors.New("the run's worktree no longer belongs to the run's repository")

// commonDir returns the resolved common git directory of the checkout top.
func (g Git) commonDir(ctx context.Context, top string) (string, error) {
	cd, err := g.run(ctx, top, nil, "", "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(top, cd)
	}
	return filepath.EvalSymlinks(cd)
}

// remoteURLs reads the remote's fetch and push URLs from the checkout's
// configuration (before the agent runs); empty when there is no such
// remote.
func (g Git) remoteURLs(ctx context.Context, top, remote string) (fetch, push string) {
	fetch, err := g.run(ctx, top, nil, "", "remote", "get-url", remote)
	if err != nil {
		return "", ""
	}
	push, err = g.run(ctx, top, nil, "", "remote", "get-url", "--push", remote)
	if err != nil || push == "" {
		push = fetch
	}
	return fetch, push
}

// guardFor returns the run's guard when it was recorded for the checkout
// top's repository, else a new one (no snapshot, no worktree yet) with the
// remote's URLs read from top's configuration.
func (d *Deliverer) guardFor(ctx context.Context, runID, top, remote string) (store.GitGuard, bool, error) {
	g := d.cfg.Git
	cd, err := g.commonDir(ctx, top)
	if err != nil {
		return store.GitGuard{}, false, fmt.Errorf("the git directory of %s: %w", top, err)
	}
	gd, ok, err := d.cfg.Store.GitGuard(ctx, runID)
	if err != nil {
		return gd, false, err
	}
	if ok && gd.CommonDir == cd {
		return gd, true, nil
	}
	gd = store.GitGuard{RunID: runID, CommonDir: cd}
	gd.FetchURL, gd.PushURL = g.remoteURLs(ctx, top, remote)
	return gd, false, nil
}

// record completes and stores the guard of the worktree wt just added
// from top: its .git file and git directory, and, unless keep, a new
// snapshot of the checkout's configuration and hooks.
func (d *Deliverer) record(ctx context.Context, gd store.GitGuard, top, wt string, keep bool) (store.GitGuard, error) {
	b, err := os.ReadFile(filepath.Join(wt, ".git"))
	if err != nil {
		return gd, fmt.Errorf("the run's worktree %s: %w", wt, err)
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return gd, fmt.Errorf("the run's worktree %s: its .git file says %q, not where its git directory is", wt, b)
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(wt, gitDir)
	}
	if r, err := filepath.EvalSymlinks(gitDir); err == nil {
		gitDir = r
	}
	if filepath.Dir(gitDir) != filepath.Join(gd.CommonDir, "worktrees") {
		return gd, fmt.Errorf("the run's worktree %s: its git directory %s is not in %s", wt, gitDir, gd.CommonDir)
	}
	gd.GitDir, gd.DotGit = gitDir, string(b)
	if !keep || len(gd.Snapshot) == 0 {
		snap := d.takeSnapshot(ctx, top, gd.CommonDir, gitDir)
		if err := d.inherit(ctx, gd, &snap); err != nil {
			return gd, err
		}
		if gd.Snapshot, err = json.Marshal(snap); err != nil {
			return gd, err
		}
		gd.Checked = false
	}
	if err := d.cfg.Store.SaveGitGuard(ctx, gd); err != nil {
		return gd, err
	}
	return gd, nil
}

// inherit makes the snapshot of another run still working in the same
// repository the baseline of snap, for the files it has: what that run's
// agent changed so far is not taken for the checkout's own.
func (d *Deliverer) inherit(ctx context.Context, gd store.GitGuard, snap *snapshot) error {
	others, err := d.cfg.Store.GitGuardsOf(ctx, gd.CommonDir)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.RunID == gd.RunID || len(o.Snapshot) == 0 {
			continue
		}
		var base snapshot
		if err := json.Unmarshal(o.Snapshot, &base); err != nil {
			continue
		}
		for _, dir := range base.Dirs {
			for p := range snap.Files {
				if _, ok := base.Files[p]; !ok && strings.HasPrefix(p, dir+string(filepath.Separator)) {
					delete(snap.Files, p) // appeared since that run began
				}
			}
			if !slicesContains(snap.Dirs, dir) {
				snap.Dirs = append(snap.Dirs, dir)
			}
		}
		for p, f := range base.Files {
			snap.Files[p] = f
		}
		return nil // the oldest run's baseline
	}
	return nil
}

// refresh takes a new snapshot for a turn about to run when the checkout
// was checked since the last turn (Park): what people changed meanwhile is
// theirs. A run recorded before guards existed gets its guard here.
func (d *Deliverer) refresh(ctx context.Context, run store.Run, dl store.Delivery, o Options) error {
	gd, ok, err := d.cfg.Store.GitGuard(ctx, run.ID)
	if err != nil {
		return err
	}
	if ok && !gd.Checked {
		return nil
	}
	if !ok {
		d.log.Warn("the run's worktree has no recorded repository, remote or git configuration (a run started by an older orchestrator): recording them as they are now", "run", run.ID)
		if gd, _, err = d.guardFor(ctx, run.ID, dl.RepoDir, o.Remote); err != nil {
			return err
		}
	}
	_, err = d.record(ctx, gd, dl.RepoDir, dl.Worktree, false)
	return err
}

// verify restores the checkout's git configuration and hooks to the
// snapshot, reporting what it restored, then checks, before the run's work
// is committed or pushed, that the worktree is still the one recorded when
// it was added: its .git file, its git directory in the run's repository,
// the run's branch. It returns the guard; the worktree's
// commands then run with wtEnv.
func (d *Deliverer) verify(ctx context.Context, run store.Run, dl store.Delivery, o Options) (store.GitGuard, error) {
	gd, ok, err := d.cfg.Store.GitGuard(ctx, run.ID)
	if err != nil {
		return gd, err
	}
	if !ok {
		if err := d.refresh(ctx, run, dl, o); err != nil {
			return gd, err
		}
		if gd, _, err = d.cfg.Store.GitGuard(ctx, run.ID); err != nil {
			return gd, err
		}
	}
	// The checkout gets its configuration and hooks back first, whatever
	// else the agent changed.
	var snap snapshot
	if err := json.Unmarshal(gd.Snapshot, &snap); err != nil {
		return gd, fmt.Errorf("run %s: the recorded git configuration: %w", run.ID, err)
	}
	keep := filepath.Join(d.cfg.Root, run.ID+".rejected", d.cfg.Now().UTC().Format("20060102T150405.000000000"))
	for _, line := range snap.restore(keep) {
		d.log.Warn("the checkout's git configuration or hooks changed while the run ran: "+line, "run", run.ID)
	}
	changed := func(format string, args ...any) error {
		return fmt.Errorf("run %s: %w: %s; nothing of the run's is committed or pushed (the worktree %s is kept)",
			run.ID, ErrWorktreeChanged, fmt.Sprintf(format, args...), dl.Worktree)
	}
	dotGit := filepath.Join(dl.Worktree, ".git")
	fi, err := os.Lstat(dotGit)
	switch {
	case err != nil:
		return gd, changed("its .git file %s is gone", dotGit)
	case !fi.Mode().IsRegular():
		return gd, changed("its .git file %s was replaced by a %s", dotGit, kind(fi.Mode()))
	}
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return gd, changed("its .git file %s cannot be read: %v", dotGit, err)
	}
	if string(b) != gd.DotGit {
		return gd, changed("its .git file %s now says %q; when the worktree was added it said %q", dotGit, strings.TrimSpace(string(b)), strings.TrimSpace(gd.DotGit))
	}
	if r, err := filepath.EvalSymlinks(gd.CommonDir); err != nil || r != gd.CommonDir {
		return gd, changed("the repository's git directory %s was moved or replaced", gd.CommonDir)
	}
	cdFile := filepath.Join(gd.GitDir, "commondir")
	cd, err := os.ReadFile(cdFile)
	if err != nil {
		return gd, changed("its git directory %s has no commondir file: %v", gd.GitDir, err)
	}
	c := strings.TrimSpace(string(cd))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gd.GitDir, c)
	}
	if r, err := filepath.EvalSymlinks(c); err != nil || r != gd.CommonDir {
		return gd, changed("its git directory's %s now names %s, not the run's repository %s", cdFile, c, gd.CommonDir)
	}
	head, err := d.cfg.Git.run(ctx, dl.Worktree, wtEnv(gd, dl), "", "symbolic-ref", "--quiet", "HEAD")
	if err != nil || head != "refs/heads/"+dl.Branch {
		if head == "" {
			head = "a detached HEAD"
		}
		return gd, changed("it is on %s, not the run's branch %s", head, dl.Branch)
	}
	gd.Checked = true
	if err := d.cfg.Store.SaveGitGuard(ctx, gd); err != nil {
		return gd, err
	}
	return gd, nil
}

// Release puts the checkout's git configuration and hooks back as they
// were before the run's last turn (its snapshot), reporting what it
// restored, and keeps the worktree. Delivery does this before it commits
// and pushes; Release does it for a run that will not get there now: it
// failed, was cancelled or stopped, or waits (parked or not) or was
// interrupted. The runner calls it whenever a drive of the run ends. A
// checkout already checked since the last turn is left alone (what changed
// since is people's), as is a run whose worktree is another instance's.
func (d *Deliverer) Release(ctx context.Context, run store.Run) error {
	gd, ok, err := d.cfg.Store.GitGuard(ctx, run.ID)
	if err != nil || !ok || gd.Checked || len(gd.Snapshot) == 0 {
		return err
	}
	dl, ok, err := d.cfg.Store.Delivery(ctx, run.ID)
	if err != nil || !ok || !d.mine(run, dl) {
		return err
	}
	var snap snapshot
	if err := json.Unmarshal(gd.Snapshot, &snap); err != nil {
		return fmt.Errorf("run %s: the recorded git configuration: %w", run.ID, err)
	}
	keep := filepath.Join(d.cfg.Root, run.ID+".rejected", d.cfg.Now().UTC().Format("20060102T150405.000000000"))
	for _, line := range snap.restore(keep) {
		d.log.Warn("the checkout's git configuration or hooks changed while the run ran: "+line, "run", run.ID, "status", run.Status)
	}
	gd.Checked = true
	return d.cfg.Store.SaveGitGuard(ctx, gd)
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	default:
		return "special file"
	}
}

// wtEnv runs a git command in the run's worktree with its recorded git
// directory, never the one its .git file names.
func wtEnv(gd store.GitGuard, dl store.Delivery) []string {
	return []string{"GIT_DIR=" + gd.GitDir, "GIT_COMMON_DIR=" + gd.CommonDir, "GIT_WORK_TREE=" + dl.Worktree}
}

// remoteRepo returns the run's own bare repository, through which fetches
// and pushes reach the remote: its configuration is ours (none), and it
// borrows the objects of the run's repository (commonDir).
func (d *Deliverer) remoteRepo(ctx context.Context, runID, commonDir string) (string, error) {
	p := filepath.Join(d.cfg.Root, ".remotes", runID+".git")
	if !isDir(p) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", fmt.Errorf("worktrees: %w", err)
		}
		if _, err := d.cfg.Git.run(ctx, filepath.Dir(p), nil, "", "init", "--quiet", "--bare", "--template=", p); err != nil {
			return "", fmt.Errorf("the run's remote repository: %w", err)
		}
	}
	alt := filepath.Join(p, "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(alt), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(alt, []byte(filepath.Join(commonDir, "objects")+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("the run's remote repository: %w", err)
	}
	return p, nil
}

// fetch fetches refspecs ("+refs/heads/…:refs/remotes/<remote>/…") from
// the recorded URL into the run's remote repository, then from there into
// the checkout top: the token is only ever used in the run's own
// repository.
func (d *Deliverer) fetch(ctx context.Context, gd store.GitGuard, top string, refspecs ...string) error {
	if gd.FetchURL == "" {
		return errors.New("no remote was recorded when the run's worktree was added")
	}
	g := d.cfg.Git
	p, err := d.remoteRepo(ctx, gd.RunID, gd.CommonDir)
	if err != nil {
		return err
	}
	args := append([]string{"--git-dir=" + p, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", gd.FetchURL}, refspecs...)
	if _, err := g.runNet(ctx, p, d.authEnv(), args...); err != nil {
		return err
	}
	local := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", p}
	for _, rs := range refspecs {
		_, dst, _ := strings.Cut(rs, ":")
		local = append(local, "+"+dst+":"+dst)
	}
	unlock, err := d.lockRepo(ctx, gd.CommonDir)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = g.run(ctx, top, nil, "", local...)
	return err
}

// pushCommit pushes commit to the run's branch at the recorded push URL,
// from the run's remote repository, never forcing.
func (d *Deliverer) pushCommit(ctx context.Context, gd store.GitGuard, commit, branch string) error {
	if gd.PushURL == "" {
		return errors.New("no remote was recorded when the run's worktree was added: nowhere to push")
	}
	p, err := d.remoteRepo(ctx, gd.RunID, gd.CommonDir)
	if err != nil {
		return err
	}
	_, err = d.cfg.Git.runNet(ctx, p, d.authEnv(), "--git-dir="+p, "push", "--porcelain", gd.PushURL, commit+":refs/heads/"+branch)
	return err
}

// remoteHead asks the recorded remote for its default branch.
func (d *Deliverer) remoteHead(ctx context.Context, gd store.GitGuard) (string, bool) {
	p, err := d.remoteRepo(ctx, gd.RunID, gd.CommonDir)
	if err != nil {
		return "", false
	}
	out, err := d.cfg.Git.runNet(ctx, p, d.authEnv(), "--git-dir="+p, "ls-remote", "--symref", gd.FetchURL, "HEAD")
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "ref: refs/heads/"); ok {
			name, _, _ := strings.Cut(rest, "\t")
			return name, true
		}
	}
	return "", false
}
