package runner

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Portable sessions. The CLI keeps a session's record (a JSONL file under
// $HOME/.claude/projects/…) on the machine that ran the turn, and `--resume`
// finds it only there. So that a run can go on from any instance of a shared
// store (or from a store copied to another machine), the runner saves the
// file to the store before it records a turn finished, and writes the
// stored copy back before a turn that resumes the session, and before
// recover reads the session, when the local file lacks part of it.
//
// Exactly once is untouched: the store's claim of an answered set still
// decides whether an answer is handed over. What the copy decides is which
// conversation a resume continues: the one the store recorded, not a stale
// or missing local one. The CLI only appends to a session file, so a local
// file that starts with the stored copy is the same conversation, as far or
// further along (a turn this machine ran that was not recorded finished):
// it is kept. Any other local file (missing, shorter, or a conversation that
// went another way on this machine while the run went on elsewhere) is
// replaced by the stored copy.
//
// Saving and restoring are best effort: an error is logged and the run goes
// on; at worst the resume fails as it would without a copy
// (CategorySessionNotFound), or continues the older conversation.

// SessionFiles moves the CLI's session file of a working directory. It is
// separate from Agent so that agents that keep no such file (and test
// fakes) need not have it: the runner checks for it with a type assertion.
// *executor.Executor satisfies it.
type SessionFiles interface {
	// ReadSession returns the session file's content; a missing file is
	// an error wrapping executor.ErrSessionFileNotFound.
	ReadSession(workDir, sessionID string) ([]byte, error)
	// WriteSession replaces the session file with content, atomically.
	WriteSession(workDir, sessionID string, content []byte) error
}

var _ SessionFiles = (*executor.Executor)(nil)

// saveSession copies the CLI's session file of turn t, run in workdir, to
// the store.
func (r *Runner) saveSession(ctx context.Context, agent Agent, run store.Run, t store.Turn, workdir string) {
	sf, ok := agent.(SessionFiles)
	sid := sessionOf(run, t)
	if !ok || sid == "" {
		return
	}
	ctx = context.WithoutCancel(ctx) // the turn happened: keep its record whatever else is going on
	content, err := sf.ReadSession(workdir, sid)
	if errors.Is(err, executor.ErrSessionFileNotFound) {
		// The CLI wrote none: the turn never reached the API.
		r.log.Debug("no session file to save", "run", run.ID, "turn", t.Seq, "session", sid)
		return
	}
	if err != nil {
		r.log.Error("save the CLI's session to the store: read it", "run", run.ID, "turn", t.Seq, "err", err)
		return
	}
	if err := r.cfg.Store.SaveSession(ctx, run.ID, sid, content); err != nil {
		r.log.Error("save the CLI's session to the store", "run", run.ID, "turn", t.Seq, "err", err)
	}
}

// restoreSession writes the stored copy of session sid of run as the CLI's
// session file for workdir, unless the local file already starts with it.
func (r *Runner) restoreSession(ctx context.Context, agent Agent, run store.Run, sid, workdir string) {
	sf, ok := agent.(SessionFiles)
	if !ok || sid == "" {
		return
	}
	stored, ok, err := r.cfg.Store.Session(ctx, run.ID, sid)
	if err != nil {
		r.log.Error("restore the CLI's session from the store", "run", run.ID, "session", sid, "err", err)
		return
	}
	if !ok || len(stored) == 0 {
		return // never saved: a run from before sessions were kept, or no turn reached the API
	}
	local, err := sf.ReadSession(workdir, sid)
	if err != nil && !errors.Is(err, executor.ErrSessionFileNotFound) {
		r.log.Error("restore the CLI's session from the store: read the local one", "run", run.ID, "session", sid, "err", err)
		return
	}
	if bytes.HasPrefix(local, stored) {
		return // the same conversation, as far along or further
	}
	if err := sf.WriteSession(workdir, sid, stored); err != nil {
		r.log.Error("restore the CLI's session from the store", "run", run.ID, "session", sid, "err", err)
		return
	}
	r.log.Info("restored the CLI's session from the store", "run", run.ID, "session", sid,
		"bytes", len(stored), "local_bytes", len(local))
}

// sessionSaveEvery is how often a running turn's session file is looked at
// and, when it grew, saved to the store (a shared store only), until it was
// saved with the turn's prompt as its "user" entry (the prompt reached the
// conversation); sessionSaveGap is the least time between two saves after
// that (the hook saves it before each tool call).
const (
	sessionSaveEvery = 200 * time.Millisecond
	sessionSaveGap   = 2 * time.Second
)

// saveSessionWhileRunning saves the CLI's session file of turn t to the
// store whenever it grew past what it held when the turn began, looking
// every sessionSaveEvery and saving at most every sessionSaveGap after the
// first save, until ctx ends or the returned stop is called (which waits
// for a save under way; calling it again does nothing). Only whole lines
// are saved. On a shared store, so that an instance taking over a
// turn whose process died knows what reached the session: the prompt (it
// is not sent again) and the tool calls made. The PreToolUse hook saves it
// too, before each tool call runs.
func (r *Runner) saveSessionWhileRunning(ctx context.Context, agent Agent, run store.Run, t store.Turn, workdir string) (stop func()) {
	sf, ok := agent.(SessionFiles)
	sid := sessionOf(run, t)
	if !ok || sid == "" || !r.cfg.Store.Shared() {
		return func() {}
	}
	// What the file holds before the turn (a resumed session) is in the
	// store already: the first save is of the turn's own lines. The CLI
	// logs the prompt it takes in before it writes it as the conversation's
	// "user" entry (executor.SessionTranscriptHas): a save of the first
	// lines alone does not tell a taker the prompt got there, so the file is
	// saved as it grows, without a gap, until a save has that entry.
	n := needle(t)
	promptSaved := n == ""
	saved := 0
	if content, err := sf.ReadSession(workdir, sid); err == nil {
		saved = bytes.LastIndexByte(content, '\n') + 1
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var savedAt time.Time
		tick := time.NewTicker(sessionSaveEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if promptSaved && !savedAt.IsZero() && time.Since(savedAt) < sessionSaveGap {
				continue
			}
			content, err := sf.ReadSession(workdir, sid)
			if err != nil {
				continue // not written yet
			}
			content = content[:bytes.LastIndexByte(content, '\n')+1]
			if len(content) == saved || len(content) == 0 {
				continue
			}
			if err := r.cfg.Store.SaveSession(ctx, run.ID, sid, content); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("save the CLI's session to the store while the turn runs", "run", run.ID, "turn", t.Seq, "err", err)
				}
				continue
			}
			saved, savedAt = len(content), time.Now()
			promptSaved = promptSaved || executor.SessionHasPrompt(content, n)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
