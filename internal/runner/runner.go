// Package runner is the orchestrator's spine: it carries a run through
// turns of the agent CLI, question rounds and answers until the model is
// done, storing every step so that a process that dies anywhere can be
// replaced by one that picks the run up where it stood.
//
// The path of a question is: executor (a turn's events) → questions (the
// markers in its text) → store (the set, pending) → surfaces (people) →
// store (the answer, then the claim) → executor (the resumed session).
//
// The loop derives its next step from the store alone, never from memory,
// which is what makes it restartable:
//
//	no turn yet                 → the first turn (--session-id fixed up front)
//	last turn unfinished        → the process died during it: recover
//	a set answered              → claim it and resume with the answer
//	a set pending               → ask, and wait for an answer
//	last turn interrupted       → resume with "continue"
//	last turn hit a rate limit  → wait, then resume with "continue"
//	last turn's marker invalid  → resume with a correction prompt
//	last turn succeeded         → done
//	otherwise                   → failed
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ Agent = (*executor.Executor)(nil)

// Agent runs turns of the agent CLI. *executor.Executor satisfies it.
type Agent interface {
	// Start starts one turn; see executor.Executor.Start.
	Start(ctx context.Context, req executor.Request) (*executor.Process, error)
	// SessionTranscriptHas reports whether the CLI's record of a session
	// contains needle: whether a prompt reached the session before a crash.
	SessionTranscriptHas(sessionID, needle string) (bool, error)
}

// ErrWaiting reports that a run is waiting for an answer that none of its
// surfaces can take any more in this process (the terminal's input ended).
// The question stays pending: `orchestrator answer` and `resume` go on.
var ErrWaiting = errors.New("waiting for an answer")

// Limits bound what one run may do.
type Limits struct {
	MaxQuestionRounds int           // question sets per run (default 20)
	MaxCorrections    int           // correction prompts in a row for a malformed QUESTION block (default 2)
	RateLimitRetries  int           // retries in a row after a rate limit (default 3)
	RateLimitBackoff  time.Duration // first wait after a rate limit, doubled each time (default 30s)
	AnswerMaxBytes    int           // cap of the answer prompt handed to the model (default 8 KiB)
}

func (l Limits) withDefaults() Limits {
	if l.MaxQuestionRounds <= 0 {
		l.MaxQuestionRounds = 20
	}
	if l.MaxCorrections <= 0 {
		l.MaxCorrections = 2
	}
	if l.RateLimitRetries < 0 {
		l.RateLimitRetries = 0
	} else if l.RateLimitRetries == 0 {
		l.RateLimitRetries = 3
	}
	if l.RateLimitBackoff <= 0 {
		l.RateLimitBackoff = 30 * time.Second
	}
	if l.AnswerMaxBytes <= 0 {
		l.AnswerMaxBytes = 8 << 10
	}
	return l
}

// Config is what a Runner is made of. Agent and Surfaces are functions of
// the run so that a spec's own settings (model, surfaces, …) apply to it.
type Config struct {
	Store *store.Store
	// Agent returns the agent for a run.
	Agent func(run store.Run) (Agent, error)
	// Surfaces returns the surfaces a run's questions are asked on.
	Surfaces func(run store.Run) ([]surfaces.Surface, error)
	// Policy returns the question policy of a run (preset answers,
	// reminders, escalation, timeout); nil means none.
	Policy func(run store.Run) Policy
	// Observe receives progress events; it must not block for long.
	Observe       func(Event)
	Limits        Limits
	TranscriptDir string // where each turn's raw NDJSON is kept (default: <state>/transcripts)
	Logger        *slog.Logger
	// Now and Sleep are the clock, replaceable in tests.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// KeepWaiting makes a run whose surfaces can no longer take an answer
	// (the terminal's input ended) keep waiting for one from another
	// process (`orchestrator answer`), as the daemon wants, instead of
	// returning ErrWaiting, as a foreground `run` wants.
	KeepWaiting bool
	// Failpoint, when set, is called at each step that changes what a crash
	// would leave behind ("question-stored", "answer-stored", "claimed",
	// "turn-started"): the crash tests kill the process there.
	Failpoint func(point string)
	// Delivery returns how a run's work is delivered through git (nil:
	// it is not; see deliver.go).
	Delivery func(run store.Run) (Delivery, error)
	// Approvals returns a run's tool-call policy when its agent runs in the
	// control protocol with the orchestrator's hook; false: native asking
	// is off for the run (approvals.go).
	Approvals func(run store.Run) (approvals.Policy, bool)
}

// Runner drives runs. It is safe for concurrent use: each run is driven by
// at most one goroutine of one process at a time (Drive takes the run's lock).
type Runner struct {
	cfg Config
	log *slog.Logger

	pumpsMu sync.Mutex
	pumps   map[string]*progressPump // by run ID, while driven here
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Agent == nil || cfg.Surfaces == nil {
		return nil, errors.New("runner: Store, Agent and Surfaces are required")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.TranscriptDir == "" {
		cfg.TranscriptDir = filepath.Join(cfg.Store.Dir(), "transcripts")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Policy == nil {
		cfg.Policy = func(store.Run) Policy { return Policy{} }
	}
	if cfg.Observe == nil {
		cfg.Observe = func(Event) {}
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	return &Runner{cfg: cfg, log: cfg.Logger, pumps: map[string]*progressPump{}}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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
	return r.cfg.Store.CreateRun(ctx, store.Run{ID: id, Spec: n.Spec, Title: n.Title, Prompt: n.Prompt,
		WorkDir: n.WorkDir, Surfaces: n.Surfaces, Options: n.Options, SessionID: session})
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

// Drive carries the run forward until it is done, failed or cancelled, or
// waits on a question no surface of this process can take (ErrWaiting), or
// ctx ends (the run is left interrupted or waiting, resumable). It returns
// the run as it then stands. Another process driving the same run makes
// Drive fail at once with an error wrapping store.ErrLocked.
func (r *Runner) Drive(ctx context.Context, runID string) (store.Run, error) {
	run, err := r.cfg.Store.Run(ctx, runID)
	if err != nil {
		return store.Run{}, err
	}
	lock, err := r.cfg.Store.LockRun(run.ID)
	if err != nil {
		return run, fmt.Errorf("run %s: %w", run.ID, err)
	}
	defer lock.Unlock()
	var pump *progressPump
	if surfs, serr := r.cfg.Surfaces(run); serr == nil {
		if reps := reportersOf(surfs); len(reps) > 0 {
			pump = r.startPump(run, reps)
		}
	}
	err = r.loop(ctx, run.ID)
	bg := context.WithoutCancel(ctx)
	if err != nil && !errors.Is(err, ErrWaiting) {
		// Shut down, cancelled, or stopped by an error while working: leave
		// the run resumable, and say so in its status.
		r.suspend(bg, run.ID)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	latest, lerr := r.cfg.Store.Run(bg, run.ID)
	if lerr != nil {
		latest, err = run, errors.Join(err, lerr)
	} else if err == nil || errors.Is(err, ErrWaiting) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		r.emit(Event{Kind: EventRunEnded, RunID: run.ID, Run: &latest, Err: err})
	}
	if pump != nil {
		r.pumpsMu.Lock()
		delete(r.pumps, run.ID)
		r.pumpsMu.Unlock()
		pump.finish(latest, err, r.cfg.Now())
	}
	return latest, err
}

// emit sends a progress event to the observer, and to the run's progress
// pump when its surfaces show progress.
func (r *Runner) emit(ev Event) {
	r.cfg.Observe(ev)
	r.pumpsMu.Lock()
	pp := r.pumps[ev.RunID]
	r.pumpsMu.Unlock()
	if pp != nil {
		pp.fold(ev, r.cfg.Now())
	}
}

// suspend marks a run that was being worked on as interrupted, unless it is
// waiting on a question (it stays waiting) or already final.
func (r *Runner) suspend(ctx context.Context, runID string) {
	run, err := r.cfg.Store.Run(ctx, runID)
	if err != nil || run.Status.Final() || run.Status == store.RunWaiting {
		return
	}
	if err := r.cfg.Store.UpdateRun(ctx, runID, store.RunUpdate{Status: store.RunInterrupted}); err != nil {
		r.log.Error("mark run interrupted", "run", runID, "err", err)
	}
}

func (r *Runner) fail(ctx context.Context, run store.Run, msg string) error {
	ctx = context.WithoutCancel(ctx)
	if err := r.cfg.Store.ExpireSets(ctx, run.ID); err != nil {
		r.log.Error("expire question sets", "run", run.ID, "err", err)
	}
	if err := r.cfg.Store.UpdateRun(ctx, run.ID, store.RunUpdate{Status: store.RunFailed, Error: &msg}); err != nil {
		return err
	}
	return nil
}

// loop takes steps until the run is final or a step says stop.
func (r *Runner) loop(ctx context.Context, runID string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		run, err := r.cfg.Store.Run(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status.Final() {
			return nil
		}
		if err := r.step(ctx, run); err != nil {
			return err
		}
	}
}

// step takes the one next step of run, as the store says it stands.
func (r *Runner) step(ctx context.Context, run store.Run) error {
	st := r.cfg.Store
	last, ok, err := st.LastTurn(ctx, run.ID)
	if err != nil {
		return err
	}
	if !ok {
		return r.turn(ctx, run, store.Turn{Kind: store.TurnStart, Prompt: run.Prompt, SessionID: run.SessionID})
	}
	if !last.Finished {
		return r.recover(ctx, run, last)
	}
	sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID, State: []store.SetState{store.SetAnswered, store.SetPending}})
	if err != nil {
		return err
	}
	for _, rec := range sets {
		if rec.State == store.SetAnswered {
			return r.resumeWithAnswer(ctx, run, rec)
		}
	}
	if len(sets) > 0 {
		return r.wait(ctx, run, sets[0])
	}
	res := last.Result
	switch {
	case res.Category == store.CategoryNotDelivered:
		// The prompt never reached the session: send it again, as it was.
		return r.turn(ctx, run, store.Turn{Kind: last.Kind, Prompt: last.Prompt, SessionID: last.SessionID, Resume: last.Resume})
	case res.Category == store.CategoryInterrupted:
		return r.turn(ctx, run, store.Turn{Kind: store.TurnContinue, Prompt: continuePrompt, SessionID: sessionOf(run, last), Resume: true})
	case res.Category == executor.CategoryRateLimit:
		return r.retry(ctx, run, last)
	case res.QuestionError != "":
		return r.correct(ctx, run, last)
	case res.Category == "" && res.Status == executor.StatusSuccess:
		return r.done(ctx, run, last) // delivers the run's work first (deliver.go)
	case res.Status == executor.StatusDeferred:
		return r.fail(ctx, run, fmt.Sprintf("turn %d ended on a tool call a PreToolUse hook deferred (%s) that the orchestrator has no question for; it cannot resume it",
			last.Seq, res.Category))
	case res.Category == executor.CategoryToolDeferredUnavailable:
		return r.fail(ctx, run, fmt.Sprintf("turn %d: the tool call the session was waiting on is not available any more (an MCP server that is gone, or a session resumed without the control protocol): %s",
			last.Seq, res.Error))
	case res.Category == executor.CategorySessionNotFound:
		return r.fail(ctx, run, fmt.Sprintf("the CLI has no session %s any more (its session store under $HOME/.claude was removed, or this is another machine or user): %s",
			sessionOf(run, last), res.Error))
	default:
		msg := res.Error
		if msg == "" {
			msg = "the agent turn ended without a result"
		}
		return r.fail(ctx, run, fmt.Sprintf("turn %d failed (%s): %s", last.Seq, orUnknown(string(res.Category)), msg))
	}
}

const continuePrompt = "The orchestrator was stopped before your last turn finished. Continue the task from where you left off."

const retryPrompt = "The previous request failed with a temporary API error (rate limit). Continue the task from where you left off."

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func sessionOf(run store.Run, last store.Turn) string {
	if last.SessionID != "" {
		return last.SessionID
	}
	return run.SessionID
}

// trailing counts the run's last turns that satisfy f.
func (r *Runner) trailing(ctx context.Context, runID string, f func(store.Turn) bool) (int, error) {
	turns, err := r.cfg.Store.Turns(ctx, runID)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := len(turns) - 1; i >= 0 && f(turns[i]); i-- {
		n++
	}
	return n, nil
}

func (r *Runner) retry(ctx context.Context, run store.Run, last store.Turn) error {
	n, err := r.trailing(ctx, run.ID, func(t store.Turn) bool { return t.Result.Category == executor.CategoryRateLimit })
	if err != nil {
		return err
	}
	if n > r.cfg.Limits.RateLimitRetries {
		return r.fail(ctx, run, fmt.Sprintf("rate limited %d times in a row; giving up: %s", n, last.Result.Error))
	}
	wait := r.cfg.Limits.RateLimitBackoff << (n - 1)
	if max := 30 * time.Minute; wait > max || wait <= 0 {
		wait = max
	}
	r.emit(Event{Kind: EventRetry, RunID: run.ID, Text: fmt.Sprintf("rate limited; retrying in %s (%d/%d)", wait, n, r.cfg.Limits.RateLimitRetries)})
	if err := r.cfg.Sleep(ctx, wait); err != nil {
		return err
	}
	return r.turn(ctx, run, store.Turn{Kind: store.TurnRetry, Prompt: retryPrompt, SessionID: sessionOf(run, last), Resume: true})
}

func (r *Runner) correct(ctx context.Context, run store.Run, last store.Turn) error {
	n, err := r.trailing(ctx, run.ID, func(t store.Turn) bool { return t.Result.QuestionError != "" })
	if err != nil {
		return err
	}
	if n > r.cfg.Limits.MaxCorrections {
		return r.fail(ctx, run, fmt.Sprintf("the model's QUESTION block was still not valid after %d correction prompts: %s",
			r.cfg.Limits.MaxCorrections, last.Result.QuestionError))
	}
	r.emit(Event{Kind: EventCorrection, RunID: run.ID, Text: last.Result.QuestionError})
	prompt := questions.CorrectionPrompt(errors.New(last.Result.QuestionError))
	return r.turn(ctx, run, store.Turn{Kind: store.TurnCorrection, Prompt: prompt, SessionID: sessionOf(run, last), Resume: true})
}

// resumeWithAnswer hands an answered set to the model, exactly once: the set
// is claimed in the transaction that records the turn, before the CLI starts.
func (r *Runner) resumeWithAnswer(ctx context.Context, run store.Run, rec store.SetRecord) error {
	prompt := answerPrompt(rec.Set, rec.Response, r.cfg.Limits.AnswerMaxBytes)
	if p, ok := toolAnswerPrompt(rec.Set); ok {
		prompt = p // the hook hands the answer over (approvals.go)
	}
	return r.turn(ctx, run, store.Turn{Kind: store.TurnAnswer, SetID: rec.Set.ID, Prompt: prompt, SessionID: run.SessionID, Resume: true})
}

// answerPrompt is the prompt that carries a set's answers. It always names
// the set's ID: after a crash the loop looks for it in the CLI's session to
// learn whether the answer already reached the model.
func answerPrompt(set questions.Set, resp questions.Response, max int) string {
	p := questions.FormatResponse(set, resp, questions.FormatOptions{MaxBytes: max})
	if !strings.Contains(p, set.ID) {
		p = fmt.Sprintf("[answers to question set %s]\n%s", set.ID, p)
	}
	return p
}

// needle is what identifies a turn's prompt in the CLI's session record.
func needle(t store.Turn) string {
	switch t.Kind {
	case store.TurnAnswer:
		return t.SetID
	case store.TurnStart:
		line := strings.TrimSpace(t.Prompt)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if r := []rune(line); len(r) > 60 {
			line = string(r[:60])
		}
		return line
	}
	return ""
}

// recover deals with a turn the process died during (or was cancelled in):
// its own transcript may hold the whole outcome; otherwise the CLI's session
// tells whether the prompt got there.
func (r *Runner) recover(ctx context.Context, run store.Run, t store.Turn) error {
	agent, err := r.cfg.Agent(run)
	if err != nil {
		return r.fail(ctx, run, err.Error())
	}
	if t.TranscriptPath != "" {
		if out, col, ok := replay(t.TranscriptPath); ok {
			r.log.Info("recovered a finished turn from its transcript", "run", run.ID, "turn", t.Seq)
			return r.finish(ctx, run, t, out, col)
		}
	}
	delivered := false
	if used, ok := r.toolAnswerHandedOut(ctx, t); ok { // approvals.go
		delivered = used
	} else if n := needle(t); n != "" {
		delivered, err = agent.SessionTranscriptHas(sessionOf(run, t), n)
		if err != nil && !errors.Is(err, executor.ErrSessionFileNotFound) {
			r.log.Warn("cannot read the CLI's session; assuming the prompt did not reach it", "run", run.ID, "err", err)
			delivered = false
		}
	}
	r.log.Info("recovering an interrupted turn", "run", run.ID, "turn", t.Seq, "kind", t.Kind, "prompt_delivered", delivered)
	if delivered {
		return r.cfg.Store.MarkTurnDelivered(ctx, run.ID, t.Seq)
	}
	return r.cfg.Store.AbandonTurn(ctx, run.ID, t.Seq)
}

// replay reads a turn's saved transcript; ok is true when it holds a result.
func replay(path string) (executor.Outcome, *questions.TurnCollector, bool) {
	f, err := os.Open(path)
	if err != nil {
		return executor.Outcome{}, nil, false
	}
	defer f.Close()
	col := &questions.TurnCollector{}
	out, err := executor.Replay(f, executor.ReaderOptions{}, func(ev executor.Event) { Collect(col, ev) })
	if err != nil || out.Result == nil {
		return executor.Outcome{}, nil, false
	}
	if strings.HasPrefix(out.TerminalReason, "aborted") {
		// The CLI was interrupted (SIGINT/SIGTERM) and wrote a result for
		// the aborted stream: the turn did not finish.
		return executor.Outcome{}, nil, false
	}
	return out, col, true
}

// Collect feeds the text of a CLI event to a turn's question collector: the
// model's own assistant text blocks (not a sub-agent's), and the result's
// text, which the collector uses only when no assistant text came.
func Collect(col *questions.TurnCollector, ev executor.Event) {
	switch ev := ev.(type) {
	case *executor.AssistantMessage:
		if ev.ParentToolUseID != "" {
			return // a sub-agent's text is not the model asking
		}
		for _, t := range ev.Texts() {
			col.AddAssistantText(t)
		}
	case *executor.Result:
		col.AddResultText(ev.Text)
	}
}

// turn runs one turn of the agent CLI and stores how it ended.
func (r *Runner) turn(ctx context.Context, run store.Run, t store.Turn) error {
	agent, err := r.cfg.Agent(run)
	if err != nil {
		return r.fail(ctx, run, err.Error())
	}
	workdir, err := r.workdir(ctx, run) // the run's worktree when it delivers through git (deliver.go)
	if err != nil {
		return r.workdirFailed(ctx, run, err)
	}
	t.RunID = run.ID
	if t.SessionID == "" {
		t.SessionID = run.SessionID
	}
	dir := filepath.Join(r.cfg.TranscriptDir, run.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("transcript dir: %w", err)
	}
	t.TranscriptDir = dir
	t, err = r.cfg.Store.BeginTurn(ctx, t) // claims the set of an answer turn
	if err != nil {
		return err
	}
	if t.Kind == store.TurnAnswer {
		r.cfg.Failpoint("claimed")
	}
	req := executor.Request{Prompt: t.Prompt, WorkDir: workdir, TranscriptPath: t.TranscriptPath}
	pol, native, err := r.approvalsOn(ctx, run) // approvals.go
	if err != nil {
		return err
	}
	var live *liveAsker
	if native {
		req.CanUseTool = r.canUseTool(run, pol)
		live = r.newLiveAsker(ctx, run)
	}
	if t.Resume {
		req.Resume = t.SessionID
	} else {
		req.SessionID = t.SessionID
	}
	r.emit(Event{Kind: EventTurnStarted, RunID: run.ID, Turn: t.Seq, TurnKind: t.Kind})
	started := r.cfg.Now()
	ex, err := agent.Start(ctx, req)
	if err != nil {
		if live != nil {
			live.stop()
		}
		return r.fail(ctx, run, fmt.Sprintf("start turn %d: %v", t.Seq, err))
	}
	if t.Kind == store.TurnAnswer {
		r.cfg.Failpoint("turn-started")
		r.notifyResumed(ctx, run, t.SetID)
	}
	col := &questions.TurnCollector{}
	for ex.Next() {
		ev := ex.Event()
		Collect(col, ev)
		r.progress(run.ID, t.Seq, ev, started)
		if live != nil {
			live.observe(ev)
		}
	}
	out := ex.Outcome()
	if live != nil {
		live.stop()
	}
	if out.Category == executor.CategoryCancelled && ctx.Err() != nil {
		// Stopped by us (shutdown, ^C): leave the turn unfinished. Whoever
		// resumes the run recovers it, and learns from the session whether
		// the prompt got there.
		return ctx.Err()
	}
	return r.finish(ctx, run, t, out, col)
}

// finish stores a turn's outcome, with the questions it asked, in one
// transaction.
func (r *Runner) finish(ctx context.Context, run store.Run, t store.Turn, out executor.Outcome, col *questions.TurnCollector) error {
	ctx = context.WithoutCancel(ctx) // the turn happened: record it whatever else is going on
	res := store.TurnResult{
		Status:       out.Status,
		Category:     out.Category,
		Error:        out.Error,
		CostUSD:      out.CostUSD,
		InputTokens:  int64(out.Usage.InputTokens),
		OutputTokens: int64(out.Usage.OutputTokens),
		NumTurns:     out.NumTurns,
		SessionID:    out.SessionID,
		FinalText:    questions.Strip(out.FinalText),
	}
	var asked *questions.Set
	if out.Category == "" {
		qs, qerr := col.Questions()
		switch {
		case qerr != nil:
			res.QuestionError = qerr.Error()
		case len(qs) > 0:
			set := questions.NewSet(run.ID, t.Seq, qs)
			set.Title = run.Title
			set.Context = col.Text()
			asked = &set
		}
	}
	if asked != nil {
		n, err := r.cfg.Store.QuestionSets(ctx, store.SetFilter{RunID: run.ID})
		if err != nil {
			return err
		}
		if len(n) >= r.cfg.Limits.MaxQuestionRounds {
			if err := r.cfg.Store.FinishTurn(ctx, run.ID, t.Seq, res, nil, nil); err != nil {
				return err
			}
			return r.fail(ctx, run, fmt.Sprintf("the model asked more than %d rounds of questions (run.max_question_rounds)", r.cfg.Limits.MaxQuestionRounds))
		}
	}
	if err := r.cfg.Store.FinishTurn(ctx, run.ID, t.Seq, res, asked, run.Surfaces); err != nil {
		return err
	}
	if err := r.parked(ctx, run, out); err != nil { // approvals.go
		return err
	}
	if asked != nil {
		r.cfg.Failpoint("question-stored")
	}
	r.emit(Event{Kind: EventTurnFinished, RunID: run.ID, Turn: t.Seq, TurnKind: t.Kind, Outcome: &out})
	return nil
}

// progress turns a CLI event into progress events.
func (r *Runner) progress(runID string, turn int, ev executor.Event, started time.Time) {
	switch ev := ev.(type) {
	case *executor.AssistantMessage:
		for _, b := range ev.Content {
			switch b.Type {
			case "text":
				if txt := strings.TrimSpace(questions.Strip(b.Text)); txt != "" {
					r.emit(Event{Kind: EventText, RunID: runID, Turn: turn, Text: txt, Elapsed: r.cfg.Now().Sub(started)})
				}
			case "tool_use":
				r.emit(Event{Kind: EventToolUse, RunID: runID, Turn: turn, Tool: b.ToolName, Text: toolSummary(b.Input),
					Elapsed: r.cfg.Now().Sub(started)})
			}
		}
	case *executor.Result:
		r.emit(Event{Kind: EventCost, RunID: runID, Turn: turn, CostUSD: ev.TotalCostUSD, Elapsed: r.cfg.Now().Sub(started)})
	}
}

// toolSummary gives a short, one-line view of a tool call's input.
func toolSummary(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := m[k].(string); ok {
			v = strings.Join(strings.Fields(v), " ")
			if r := []rune(v); len(r) > 80 {
				v = string(r[:79]) + "…"
			}
			return v
		}
	}
	return ""
}
