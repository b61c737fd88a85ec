package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// rootOutsideCheckouts returns where worktrees are added: root, unless root
// is inside a git checkout (a worktree there would be inside the person's
// repository: untracked files in it, and a nested checkout the agent works
// in), then a folder named after root in base/worktrees (base: the user's
// state directory, config.DefaultStateDir).
func rootOutsideCheckouts(root, base string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	top, inside := checkoutOf(abs)
	if !inside {
		return root, nil
	}
	if base == "" {
		return "", fmt.Errorf("the worktrees folder %s is inside the git checkout %s, and there is no other place for them (no user state directory: $XDG_STATE_HOME and $HOME are unset): set state_dir outside the checkout", root, top)
	}
	sum := sha256.Sum256([]byte(abs))
	away := filepath.Join(base, "worktrees", filepath.Base(filepath.Dir(abs))+"-"+hex.EncodeToString(sum[:4]))
	if t2, in := checkoutOf(away); in {
		return "", fmt.Errorf("the worktrees folder %s is inside the git checkout %s, and so is %s (in %s): set state_dir outside any checkout", root, top, away, t2)
	}
	return away, nil
}

// checkoutOf returns the top of the git checkout dir is in: the nearest
// folder at or above dir holding a .git (folder or file).
func checkoutOf(dir string) (string, bool) {
	for d := filepath.Clean(dir); ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, true
		}
		up := filepath.Dir(d)
		if up == d {
			return "", false
		}
		d = up
	}
}
