// Package surfaces is where questions meet people: the Surface interface the
// run loop asks through, the Answers a surface hands people's answers to,
// and the fan-out that asks on several surfaces at once.
//
// The store decides; surfaces report. A surface does not return the answer
// from Ask: it offers every answer a person gives to Answers (the runner
// implements it over the store: first valid answer wins, in one
// transaction) and tells the person what became of it. The runner waits on
// the store only.
//
// Each surface lives in its own subpackage (terminal, github, discord), is
// built from plain arguments, and asserts at compile time that it satisfies
// Surface. This package imports none of them.
package surfaces

import (
	"context"
	"errors"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Surface is a place where people can answer questions.
//
// Implementations are safe for concurrent use: the run loop may ask several
// sets at once, each from its own goroutine.
type Surface interface {
	// Name identifies the surface in logs, the store and answers
	// ("terminal", "github", "discord").
	Name() string

	// Ask shows set to people and, until ctx ends, hands every answer given
	// by someone allowed to answer to answers.Offer, then tells that person
	// what became of it:
	//   - taken: from then on the surface shows the set (or the questions
	//     answered) as answered by them; the runner does NOT call Resolve on
	//     the surface that took the answer;
	//   - invalid: the reason (Decision.Invalid), and the question stays open;
	//   - too late (Decision.Closed): "answered elsewhere by …" (Final.By),
	//     or that the question is closed when Final is nil.
	//
	// Ask returns ctx.Err() when ctx ends (the question stays posted), or an
	// error wrapping ErrUnavailable when it can no longer take answers (the
	// terminal's input reached EOF). It may return nil once an Offer said
	// the set is Closed: there is nothing more to take.
	//
	// ctx bounds the waiting, not what the surface does about a decision
	// already made: the runner ends ctx as soon as the store has the set's
	// answer, which can be before the Offer that gave it returns. Telling
	// the person what became of an offered answer (a reaction, the question
	// edited to show who answered, a reply) and recording that it was
	// decided run on a context of their own (context.WithoutCancel of ctx
	// with a timeout, ended when the surface closes), so that an answer
	// given while no process ran, found and taken by the next Ask, is
	// acknowledged like any other. surfacetest cancels as the runner does.
	//
	// Every request to a service has a timeout: a service that does not
	// answer fails the request (Ask returns an error, and the runner asks
	// again after a backoff) instead of holding the question, and the
	// surface says so in its Health (HealthReporter).
	//
	// Ask is idempotent on set.ID: asking again (a retry, or a new process
	// after a restart) finds what was posted instead of posting twice, and
	// offers answers given meanwhile.
	Ask(ctx context.Context, set questions.Set, answers Answers) error
}

// Watcher is implemented by surfaces that ask without holding a goroutine
// per question set: serve's waiting runs, thousands at once, are watched
// this way (a surface that is not a Watcher is asked with Ask, from a
// goroutine of its own).
//
// Watch shows set as Ask does (idempotent on set.ID: it finds what was
// posted instead of posting twice, and offers the answers given while
// nobody watched) and returns once the set is shown. From then on, until
// Unwatch or the surface closes, the surface's own listener (GitHub's
// poller, Discord's gateway) hands every answer an allowed person gives to
// answers and tells them what became of it, exactly as during an Ask; the
// acknowledgement never depends on ctx, which bounds Watch's own requests
// only. An error means the set may not be shown (a 502, a service that
// does not answer): the caller calls Watch again after a backoff. Watching
// a set watched already makes no request and returns nil.
type Watcher interface {
	Watch(ctx context.Context, set questions.Set, answers Answers) error
	// Unwatch stops taking answers for the set (it is settled, or its run
	// ended): what the surface keeps of it is let go. Idempotent, and makes
	// no request.
	Unwatch(setID string)
}

// Answers is where a surface hands the answers people give. The store
// implements it (store.Offer decides in one transaction; the runner hands
// each surface its run's view). Safe for concurrent use.
type Answers interface {
	// Offer records resp (resp.Surface and resp.By set by the surface) if it
	// is valid for the set and the set still pending: first valid answer
	// wins, in one transaction. resp may answer only some questions of a
	// multi-question set (in the set's order): they are kept and the set
	// stays pending for the rest. An error is a failure to decide (store
	// down); a decision against resp is not an error.
	Offer(ctx context.Context, resp questions.Response) (Decision, error)
}

// GroupAnswers is implemented by the Answers the runner hands surfaces:
// the same question waiting in several runs, answered together (issue 28).
//
// Group lists the other runs a set's question waits in
// (questions.Fingerprint: the same text, options and kind, or for an
// approval the same tool and input), as they stand (answered meanwhile:
// gone; asked since: there), oldest first, at most max (max <= 0: all of
// them, for answering them all): one indexed read. A surface that shows this
// fills set.Group with WithGroup when it shows the set, says so
// (questions.GroupNote) and offers to answer them all: a flag (`/answer
// QID ANSWER --all` on GitHub), a button (Discord), a choice (the web
// inbox).
//
// OfferGroup decides resp (an answer to set resp.SetID, of the run the
// Answers is for) and the same answer to each set of others (IDs from
// set.Group or Group) in one transaction: each set is decided as Offer
// decides one (first valid answer wins per set; one answered before is
// reported Closed, with its Final). The surface passes only the sets the
// person may answer by its own rules (GitHub: write permission on the
// repository the set is asked in, or the allow list; Discord: the allowed
// roles of the set's channel): someone may answer for all only if they may
// answer in every run, otherwise only where they may, and the surface
// tells them which runs it left out. The result's first outcome is resp's
// set's. Each run whose set took the answer resumes with it once, and its
// decision log names the shared decision (ID) and the runs it covered.
//
// A surface that does not offer this (Slack, until it does) shows sets as
// before; set.Group is only information for it.
type GroupAnswers interface {
	Answers
	Group(ctx context.Context, setID string, max int) ([]questions.GroupRun, error)
	OfferGroup(ctx context.Context, resp questions.Response, others []string) (questions.GroupDecision, error)
}

// WithGroup is set with set.Group filled from answers (at most
// questions.GroupShown runs, set.GroupMore when there are more: one read
// however large the group), when answers is a GroupAnswers and set.Group
// is empty; set as it is otherwise, and when the
// store cannot tell (the question is shown all the same: the error is for
// the log).
func WithGroup(ctx context.Context, set questions.Set, answers Answers) (questions.Set, error) {
	ga, ok := answers.(GroupAnswers)
	if !ok || len(set.Group) > 0 || questions.Fingerprint(set) == "" {
		return set, nil
	}
	g, err := ga.Group(ctx, set.ID, questions.GroupShown+1)
	if err != nil {
		return set, err
	}
	if len(g) > questions.GroupShown {
		g, set.GroupMore = g[:questions.GroupShown], true
	}
	set.Group = g
	return set, nil
}

// Decision is what became of an offered answer (questions.Decision: the
// store decides, and imports nothing of the surfaces).
type Decision = questions.Decision

// ErrUnavailable reports that a surface cannot take an answer any more.
var ErrUnavailable = errors.New("surface cannot take an answer")

// ErrNotAsked reports that a set was not shown on a surface (yet): there is
// nothing there to remind people of.
var ErrNotAsked = errors.New("the question was not posted there yet")

// HealthReporter is implemented by surfaces that can tell whether their
// service serves them: one that does not answer in time, refuses the
// credentials, or keeps answering 403 or 410 on a repository. Health
// returns nil while it does, else why not, in a short sentence without
// secrets; serve reports it on /healthz (status "degraded") and in
// orchestrator_surface_up. Safe for concurrent use; it makes no request.
type HealthReporter interface {
	Health() error
}

// Resolver is implemented by surfaces that can show that a set was answered
// elsewhere: edit the comment, disable the buttons, print a line. The run
// loop calls Resolve, once the answer is stored, on every surface the set
// was asked on except the one named in final.Surface (which showed it when
// its Offer was taken).
type Resolver interface {
	Resolve(ctx context.Context, set questions.Set, final questions.Response) error
}

// Reminder is implemented by surfaces that can remind people of a question
// still waiting for an answer. Remind returns an error wrapping ErrNotAsked,
// and posts nothing, when the set was not shown there yet: no reminder ever
// comes before its question.
type Reminder interface {
	Remind(ctx context.Context, set questions.Set) error
}

// ResumeNotifier is implemented by surfaces that show that the answer was
// handed to the model and the session resumed (GitHub's 🚀 reaction).
type ResumeNotifier interface {
	Resumed(ctx context.Context, set questions.Set) error
}

// Closer is implemented by surfaces that can show a question set closed
// without an answer (its run was cancelled, or it timed out), so that nobody
// answers a dead question. reason is short and says why ("cancelled by
// alice", "timed out: no answer within 4m0s"). The run loop calls it once,
// on every surface the set was asked on; it is idempotent.
type Closer interface {
	CloseSet(ctx context.Context, set questions.Set, reason string) error
}

// RunEnder is implemented by surfaces that keep something per run and tidy
// it when the run ends for good (GitHub closes the run's own issue with a
// final comment). The run loop calls it once a drive finds the run done,
// failed or cancelled; it is idempotent. p is the run's final progress
// (p.Final is set; p.Step is the run's status, p.Summary the final text or
// the error: model output, surfaces clean it).
type RunEnder interface {
	RunEnded(ctx context.Context, p RunProgress) error
}

// Noticer is implemented by surfaces that can post a notice about a run
// or its spec, outside any question: a schedule that paused itself, a run
// that ended (internal/notify). GitHub comments on the run's issue (opened
// when it has none); the terminal prints it (serve's: logs it). key makes
// it idempotent: a notice of a key posted already is not posted again.
type Noticer interface {
	Notice(ctx context.Context, runID, key, text string) error
}

// ProgressReporter is implemented by surfaces that show how a run is going
// (GitHub's sticky status comment). The run loop calls Progress as the run
// advances, from one goroutine per run and never for two runs' progress in
// the same call; the surface decides how often it really writes. A Final
// progress is the last one of a drive.
type ProgressReporter interface {
	Progress(ctx context.Context, p RunProgress) error
}

// RunProgress is where a run stands.
type RunProgress struct {
	RunID string
	Title string
	// Step says what happens now: "turn 2 running", "waiting for an
	// answer", "done", "failed", …
	Step     string
	Turn     int
	ToolUses int
	LastTool string // the last tool used, with a short view of its input
	CostUSD  float64
	Elapsed  time.Duration
	// Final is set on the last progress of a drive; Summary then holds the
	// final text or the error (model output: surfaces clean it).
	Final   bool
	Summary string
	// PRURL is, on the final progress of a run delivered through a pull
	// request, the pull request's page; empty otherwise.
	PRURL string
	// Refused lists tool calls the CLI refused in the run, oldest first,
	// at most MaxRefused of them; RefusedMore counts those left out. A run
	// that "succeeded" without doing what it needed is noticed this way.
	Refused     []RefusedCall
	RefusedMore int
}

// MaxRefused is how many refused tool calls a RunProgress lists.
const MaxRefused = 10

// RefusedCall is a tool call the CLI refused: its tool and a short one-line
// view of its input, made printable (questions.Printable) by the run loop;
// surfaces still escape them for their own markup.
type RefusedCall struct {
	Turn    int
	Tool    string
	Summary string
}
