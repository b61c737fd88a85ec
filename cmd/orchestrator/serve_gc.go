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
// ends. On a shared store only the leader of the instances runs it (a
// leadership of its own, "gc"); on SQLite, serve's one process does.
func (m *Main) serveGC(ctx context.Context, st *store.Store) {
	st.Lead(ctx, "gc", time.Minute, func(lctx context.Context) {
		m.gcLoop(lctx, st, serveGCEvery, nil)
	})
}

// gcLoop runs gc now and then every every, until ctx ends; ran, when set,
// is told each result (tests).
func (m *Main) gcLoop(ctx context.Context, st *store.Store, every time.Duration, ran func(gcReport, error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := m.collect(ctx, st, m.Config.Git.KeepWorktrees.Std(), false)
		if err != nil && ctx.Err() == nil {
			m.Logger.Warn("gc failed (tried again tomorrow; run orchestrator gc to see)", "err", err)
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
