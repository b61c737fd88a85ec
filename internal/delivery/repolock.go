package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// Runs of one repository share its git directory, and some of our git
// commands there must not overlap: `git worktree add` first writes the new
// worktree's HEAD as the null object id, and a fetch into the checkout at
// that moment fails its connectivity check on it ("bad object
// worktrees/<run>/HEAD"); two fetches race for the same remote-tracking
// refs; a prune can drop a worktree being added. lockRepo serializes them,
// across the processes of this machine (two `orchestrator run`s, or a run
// beside `serve`), with an flock per git directory kept under Root.

// lockRepo waits (until ctx ends) for the lock of the repository whose
// common git directory is commonDir and returns its release.
func (d *Deliverer) lockRepo(ctx context.Context, commonDir string) (unlock func(), err error) {
	if resolved, err := filepath.EvalSymlinks(commonDir); err == nil {
		commonDir = resolved
	}
	dir := filepath.Join(d.cfg.Root, ".locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("worktrees: %w", err)
	}
	sum := sha256.Sum256([]byte(commonDir))
	l := flock.New(filepath.Join(dir, "repo-"+hex.EncodeToString(sum[:8])+".lock"))
	ok, err := l.TryLockContext(ctx, 20*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("lock the git directory %s: %w", commonDir, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock the git directory %s: %w", commonDir, ctx.Err())
	}
	return func() { l.Unlock() }, nil
}

// lockCheckout is lockRepo for the checkout top.
func (d *Deliverer) lockCheckout(ctx context.Context, top string) (func(), error) {
	cd, err := d.cfg.Git.commonDir(ctx, top)
	if err != nil {
		return nil, fmt.Errorf("the git directory of %s: %w", top, err)
	}
	return d.lockRepo(ctx, cd)
}
