package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// NewRun describes a run to create.
type NewRun struct {
	Spec     string
	Title    string
	Prompt   string
	WorkDir  string
	Surfaces []string
	// Options is kept with the run, for whoever resumes it (the spec path,
	// overrides, …).
	Options json.RawMessage
	// Tick is the schedule tick the run is made for (specs.TickOf): on a
	// shared store one instance makes it, Create returns an error wrapping
	// store.ErrTickTaken to the others.
	Tick time.Time
	// Queued makes the run wait for any instance to take it (`orchestrator
	// submit`) instead of being driven by its creator.
	Queued bool
	// Request, when set, is the request the run is made for (an
	// Idempotency-Key of the web API): the store makes one run per person
	// and key, and returns the first with store.ErrRequestReplayed.
	Request *store.RunRequest
	// Trigger is the event outside the orchestrator that starts the run
	// (a GitHub issue comment, a label): recorded with the run in one
	// transaction, so that one event makes one run (Create returns an
	// error wrapping store.ErrTriggerTaken to the others, and
	// store.ErrTriggerLimit past TriggerLimit runs of its repository in an
	// hour). Decisions, given the run's ID, are recorded with it
	// (comment_decisions), such as the issue the run's questions are asked
	// in.
	Trigger      *store.Trigger
	TriggerLimit int
	Decisions    func(runID string) map[string]string
}

// Create stores a new run, ready to be driven. Its session ID is chosen now
// and given to the CLI with --session-id, so the run always knows its
// session, even when the process dies during the first turn.
func (r *Runner) Create(ctx context.Context, n NewRun) (store.Run, error) {
	if strings.TrimSpace(n.Prompt) == "" {
		return store.Run{}, errors.New("create run: the prompt is empty")
	}
	if n.Title == "" {
		n.Title = titleOf(n.Prompt)
	}
	id, err := newID()
	if err != nil {
		return store.Run{}, err
	}
	session, err := newUUID()
	if err != nil {
		return store.Run{}, err
	}
	run := store.Run{ID: id, Spec: n.Spec, Title: n.Title, Prompt: n.Prompt,
		WorkDir: n.WorkDir, Surfaces: n.Surfaces, Options: n.Options, SessionID: session, Tick: n.Tick, Request: n.Request}
	if n.Queued {
		run.Status = store.RunQueued
	}
	if r.cfg.Store.Shared() && !n.Queued {
		// A run whose work is not delivered through git (by a delivery
		// that pushes) lives in its working directory, on this machine:
		// only the instances here may drive it. One delivered through git
		// moves with its branch. A
		// queued run is tied to the machine of the instance that takes it
		// (Drive), not to the one it was submitted from.
		movable, err := r.movable(run)
		if err != nil {
			return store.Run{}, fmt.Errorf("create run: %w", err)
		}
		if !movable {
			run.Host = store.Hostname()
		}
	}
	if n.Trigger != nil {
		var decisions map[string]string
		if n.Decisions != nil {
			decisions = n.Decisions(run.ID)
		}
		return r.cfg.Store.CreateTriggeredRun(ctx, run, *n.Trigger, n.TriggerLimit, decisions)
	}
	return r.cfg.Store.CreateRun(ctx, run)
}

func titleOf(prompt string) string {
	line := strings.TrimSpace(prompt)
	for _, l := range strings.Split(line, "\n") {
		l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#"))
		if l != "" {
			line = l
			break
		}
	}
	if r := []rune(line); len(r) > 72 {
		line = string(r[:71]) + "…"
	}
	return line
}

func newID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new run ID: %w", err)
	}
	return "r" + hex.EncodeToString(b[:]), nil
}

func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new session ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
