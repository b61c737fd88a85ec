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
//	last turn stopped at max_cost_usd or max_turns
//	                            → (its set asks whether to go on, limit.go)
//	last turn succeeded         → done
//	otherwise                   → failed
package runner

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/approvals"
	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
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

// ErrParked reports that a drive stopped at a pending question set
// (Config.Park): the run waits, driven by nobody, until it is answered.
var ErrParked = errors.New("parked on a pending question")

// ErrLeaseLost reports that a drive stopped because this process lost the
// run's lease (it stalled or lost the database for longer than the lease
// lasts): another instance may drive the run now, so this one leaves it
// as it stands.
//
// It is the store's ErrLeaseLost: a write refused because another process
// took the run's lock since (its fencing token is higher) says the same.
var ErrLeaseLost = store.ErrLeaseLost

// Limits bound what one run may do.
type Limits struct {
	MaxQuestionRounds int           // question sets per run (default 20)
	MaxCorrections    int           // correction prompts in a row for a malformed QUESTION block (default 2)
	RateLimitRetries  int           // retries in a row after a rate limit (default 3)
	RateLimitBackoff  time.Duration // first wait after a rate limit, doubled each time (default 30s)
	AnswerMaxBytes    int           // cap of the answer prompt handed to the model (default 8 KiB)
	AskRetryBackoff   time.Duration // first wait before asking again on surfaces that all failed, doubled each time up to 5m (default 5s)
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
	if l.AskRetryBackoff <= 0 {
		l.AskRetryBackoff = 5 * time.Second
	}
	return l
}

// Resolved is what a run is driven with: its agent, the surfaces its
// questions are asked on and its question policy.
type Resolved struct {
	Agent    Agent
	Surfaces []surfaces.Surface
	Policy   Policy
	// Approvals is the run's tool-call policy when its agent runs in the
	// CLI's control protocol with the orchestrator's hook; nil: native
	// asking is off for the run (approvals.go).
	Approvals *approvals.Policy
}

// Config is what a Runner is made of. Resolve is a function of the run so
// that a spec's own settings (model, surfaces, presets, …) apply to it.
type Config struct {
	Store *store.Store
	// Resolve returns what a run is driven with. Drive calls it once, when
	// it takes the run up; an error fails the run, saying why.
	Resolve func(run store.Run) (Resolved, error)
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
	// Park makes a drive that reaches a question still pending stop there
	// (ErrParked) instead of asking it: a waiting run holds no lock, no
	// goroutine and no process; serve's (leading) instance asks its
	// questions (AskWaiting), and a worker drives it on once it is
	// answered. On a shared store each turn's work is also parked on the
	// run's branch, for whichever instance goes on with it.
	Park bool
	// CLISlots, when not nil, bounds the agent CLIs this process runs at
	// once (serve.max_concurrent_runs), whatever started their run (a
	// schedule, an answer, a submission, a restart): a turn takes a slot
	// before it starts and gives it back when it has ended. A run waiting
	// on a question holds none. Its capacity is the bound.
	CLISlots chan struct{}
	// Failpoint, when set, is called at each step that changes what a crash
	// would leave behind ("question-stored", "answer-stored", "claimed",
	// "turn-started"): the crash tests kill the process there.
	Failpoint func(point string)
	// Delivery returns how a run's work is delivered through git (nil:
	// it is not; see deliver.go).
	Delivery func(run store.Run) (Delivery, error)
	// Guard, when set, is started with each CLI process of a run driven
	// under a lease of a shared store (turn.go): it watches the lease from
	// outside this process and kills the CLI's process group (pid) once the
	// take of fencing token token is no longer the run's, or is not
	// renewed, so that a CLI whose driver is stalled (stopped, swapped out)
	// does nothing more once another instance may take the run over. stop
	// ends the guard; it is called when the CLI has ended.
	Guard func(runID string, token int64, pid int) (stop func())
	// Caps are the spend caps on all runs together (caps.go).
	Caps Caps
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
	if cfg.Store == nil || cfg.Resolve == nil {
		return nil, errors.New("runner: Store and Resolve are required")
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
		cfg.Sleep = retry.Sleep
	}
	if cfg.Observe == nil {
		cfg.Observe = func(Event) {}
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	return &Runner{cfg: cfg, log: cfg.Logger, pumps: map[string]*progressPump{}}, nil
}
