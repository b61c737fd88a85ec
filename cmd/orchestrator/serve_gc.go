package main

import (
	"context"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// serveGCEvery is how often serve runs gc (the retention: config
// retention, git.keep_worktrees).
const serveGCEvery = 24 * time.Hour

// serveGC runs gc once when serve starts and then once a day, until ctx
// ends. On SQLite serve's one process does all of it. On a store several
// instances share, each instance removes its own machine's files (the
// worktrees it finds here, local branches, transcripts), and only the
// leader of the instances (a leadership of its own, "gc") the store's
// rows.
func (m *Main) serveGC(ctx context.Context, st *store.Store) {
	if !st.Shared() {
		m.gcLoop(ctx, st, serveGCEvery, gcAll, nil)
		return
	}
	go m.gcLoop(ctx, st, serveGCEvery, gcParts{files: true, here: true}, nil)
	st.Lead(ctx, "gc", time.Minute, func(lctx context.Context) {
		m.gcLoop(lctx, st, serveGCEvery, gcParts{rows: true}, nil)
	})
}

// gcLoop runs the parts of gc now and then every every, until ctx ends;
// ran, when set, is told each result (tests).
func (m *Main) gcLoop(ctx context.Context, st *store.Store, every time.Duration, parts gcParts, ran func(gcReport, error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := m.collect(ctx, st, m.Config.Git.KeepWorktrees.Std(), false, parts)
		if err != nil && ctx.Err() == nil {
			m.Logger.Warn("gc failed (tried again tomorrow; orchestrator gc says more)", "err", err)
		}
		if n := len(rep.Worktrees) + len(rep.Branches) + len(rep.Transcripts) + len(rep.Runs); n > 0 {
			m.Logger.Info("gc removed what is past the retention", "worktrees", len(rep.Worktrees), "branches", len(rep.Branches),
				"transcripts", len(rep.Transcripts), "runs", len(rep.Runs), "rows", rep.Rows, "freed_bytes", rep.Bytes)
		}
		if ran != nil {
			ran(rep, err)
		}
		t.Reset(every)
	}
}
