package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// GitGuard is what a run's worktree was when the orchestrator added it,
// before the agent ran in it (internal/delivery): what the orchestrator's
// own git commands check, and go by, before they commit and push.
type GitGuard struct {
	RunID string
	// CommonDir is the repository's common git directory (resolved).
	CommonDir string
	// GitDir is the worktree's own git directory (CommonDir/worktrees/…).
	GitDir string
	// DotGit is what the worktree's .git file said.
	DotGit string
	// FetchURL and PushURL are the remote's URLs, read from the checkout's
	// configuration when the worktree was added; empty: no remote.
	FetchURL string
	PushURL  string
	// Snapshot is the checkout's git configuration and hooks as they were
	// (an encoding internal/delivery owns).
	Snapshot []byte
	// Checked is set when the checkout was last checked against Snapshot
	// (and anything changed restored) and no turn ran since: the next
	// turn may take a new snapshot, so that what people change while the
	// run waits is theirs to keep.
	Checked   bool
	UpdatedAt time.Time
}

// GitGuard returns the guard of a run's worktree; ok is false when it has
// none.
func (s *Store) GitGuard(ctx context.Context, runID string) (g GitGuard, ok bool, err error) {
	var updated int64
	var checked int
	err = s.db.QueryRowContext(ctx, `SELECT run_id, common_dir, git_dir, dot_git, fetch_url, push_url, snapshot, checked, updated_at
		FROM git_guards WHERE run_id = ?`, runID).Scan(&g.RunID, &g.CommonDir, &g.GitDir, &g.DotGit, &g.FetchURL, &g.PushURL, &g.Snapshot, &checked, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return GitGuard{}, false, nil
	}
	if err != nil {
		return GitGuard{}, false, fmt.Errorf("git guard of run %s: %w", runID, err)
	}
	g.Checked, g.UpdatedAt = checked != 0, fromNanos(updated)
	return g, true, nil
}

// SaveGitGuard stores g as the guard of its run's worktree, replacing what
// was stored before.
func (s *Store) SaveGitGuard(ctx context.Context, g GitGuard) error {
	if g.RunID == "" || g.CommonDir == "" || g.GitDir == "" {
		return errors.New("save git guard: run ID, common dir and git dir are required")
	}
	if g.Snapshot == nil {
		g.Snapshot = []byte{}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO git_guards (run_id, common_dir, git_dir, dot_git, fetch_url, push_url, snapshot, checked, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?)
		ON CONFLICT(run_id) DO UPDATE SET common_dir = excluded.common_dir, git_dir = excluded.git_dir, dot_git = excluded.dot_git,
			fetch_url = excluded.fetch_url, push_url = excluded.push_url, snapshot = excluded.snapshot,
			checked = excluded.checked, updated_at = excluded.updated_at`,
		g.RunID, g.CommonDir, g.GitDir, g.DotGit, g.FetchURL, g.PushURL, g.Snapshot, boolInt(g.Checked), nanos(s.now().UTC()))
	if err != nil {
		return fmt.Errorf("save git guard of run %s: %w", g.RunID, err)
	}
	return nil
}

// GitGuardsOf returns the guards recorded for worktrees of one repository
// (its common git directory) by runs that have not ended, oldest first.
func (s *Store) GitGuardsOf(ctx context.Context, commonDir string) ([]GitGuard, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT g.run_id, g.common_dir, g.git_dir, g.dot_git, g.fetch_url, g.push_url, g.snapshot, g.checked, g.updated_at
		FROM git_guards g JOIN runs r ON r.id = g.run_id WHERE g.common_dir = ? AND r.status NOT IN (?, ?, ?, ?) ORDER BY r.created_at, r.id`,
		commonDir, RunDone, RunFailed, RunCancelled, RunStopped)
	if err != nil {
		return nil, fmt.Errorf("git guards of %s: %w", commonDir, err)
	}
	defer rows.Close()
	var out []GitGuard
	for rows.Next() {
		var g GitGuard
		var checked int
		var updated int64
		if err := rows.Scan(&g.RunID, &g.CommonDir, &g.GitDir, &g.DotGit, &g.FetchURL, &g.PushURL, &g.Snapshot, &checked, &updated); err != nil {
			return nil, fmt.Errorf("git guards of %s: %w", commonDir, err)
		}
		g.Checked, g.UpdatedAt = checked != 0, fromNanos(updated)
		out = append(out, g)
	}
	return out, rows.Err()
}
